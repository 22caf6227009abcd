"""Worker tasks: the same jobs the in-process runner runs, in a Celery worker.

Each runs on its worker process's long-lived event loop (`app.worker.runtime`), so
concurrent tasks share the ingestion pipeline's batches and one engine; the retention sweep
beat schedules runs there too, on the same engine.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from celery.concurrency.prefork import TaskPool as PreforkPool
from celery.signals import worker_process_init, worker_process_shutdown, worker_ready
from celery.signals import worker_shutdown as worker_stopping

from app.collections.jobs import DELETE_COLLECTION
from app.conversation.pipeline.summary import SUMMARIZE
from app.conversation.pipeline.summary_job import fold_session
from app.ingestion.jobs import INGEST
from app.knowledge.languages.job import REBUILD_LEXICAL_INDEX
from app.knowledge.languages.job import rebuild_lexical_index as rebuild
from app.retention.tasks import SWEEP, sweep_job
from app.worker.celery_app import celery_app
from app.worker.runtime import close_worker_runtime, worker_runtime

logger = logging.getLogger(__name__)


@celery_app.task(name="threadline.ping")
def ping() -> str:
    """A no-op used by health checks and smoke tests."""
    return "pong"


@celery_app.task(name=INGEST, acks_late=True)
def ingest(kind: str, tenant_id: str, object_id: str) -> str:
    """Ingest one document or attachment (retries inside the pipeline). `skipped` when it
    was not this task's to do: already ingested, or held by another live process."""
    runtime = worker_runtime()
    handler = runtime.run(runtime.ingestion_handlers())[INGEST]

    async def run() -> str:
        return str(await handler(kind=kind, tenant_id=tenant_id, object_id=object_id))

    return runtime.run(run())


@celery_app.task(name=REBUILD_LEXICAL_INDEX, acks_late=True)
def rebuild_lexical_index(tenant_id: str) -> int:
    """Re-analyse a tenant's chunks with its language (ADR 0076); how many were. A task
    run twice, or after the language changed again, is harmless: it only moves chunks to
    the tenant's current language."""
    import uuid

    runtime = worker_runtime()
    return runtime.run(
        rebuild(
            runtime.sessionmaker,
            uuid.UUID(tenant_id),
            batch=runtime.settings.language_rebuild_batch,
        )
    )


@celery_app.task(name=SUMMARIZE)
def summarize(tenant_id: str, session_id: str) -> str:
    """Fold a session's due turns into its running summary (`folded`, `busy`, `not_due`,
    `superseded` or `failed`: a failed fold waits for the next turn to enqueue it again)."""
    import uuid

    runtime = worker_runtime()
    return runtime.run(fold_session(runtime, uuid.UUID(tenant_id), uuid.UUID(session_id)))


@celery_app.task(name=DELETE_COLLECTION, acks_late=True)
def delete_collection(tenant_id: str, collection_id: str) -> int:
    """Delete a collection's documents in batches, then the collection (ADR 0078)."""
    import uuid

    from app.collections.jobs import delete_collection as run

    runtime = worker_runtime()
    return runtime.run(run(runtime.sessionmaker, uuid.UUID(tenant_id), uuid.UUID(collection_id)))


@celery_app.task(name=SWEEP)
def retention_sweep() -> dict[str, int]:
    """Purge what each tenant's retention policy no longer keeps; counts by kind."""
    runtime = worker_runtime()
    return runtime.run(sweep_job(runtime.sessionmaker, runtime.history))


def _build_in_background() -> None:
    # Loading a model can outlast Celery's start-up timeouts; a task waits for it instead.
    threading.Thread(target=_build, name="threadline-worker-start", daemon=True).start()


def _build() -> None:
    try:
        runtime = worker_runtime()
        runtime.run(runtime.ingestion_handlers())  # load the model before the first document
    except Exception:  # the first task tries again, and says why
        logger.exception("worker runtime could not be built")


@worker_process_init.connect
def _start_child(**_: Any) -> None:
    _build_in_background()  # a prefork child: its loop, engine and recovery


@worker_ready.connect
def _start_worker(sender: Any = None, **_: Any) -> None:
    # The solo and threads pools run tasks in this process; prefork children have their own.
    if not isinstance(getattr(sender, "pool", None), PreforkPool):
        _build_in_background()


@worker_process_shutdown.connect
@worker_stopping.connect
def _stop(**_: Any) -> None:
    close_worker_runtime()
