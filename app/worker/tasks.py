"""Worker tasks: the same jobs the in-process runner runs, in a Celery worker.

Each runs on its worker process's long-lived event loop (`app.worker.runtime`), so
concurrent tasks share the ingestion pipeline's batches and one engine; the retention sweep
beat schedules runs there too, on the same engine.

At SIGTERM the worker does not wait for its ingestions (docs/adr/0084): the signal makes
the runtime cancel them and hand their documents back, and each ingestion task then
rejects its message back to the broker (`acks_late`), for the next worker to take at once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from concurrent.futures import CancelledError
from typing import Any

from billiard.process import current_process
from celery.concurrency.prefork import TaskPool as PreforkPool
from celery.concurrency.solo import TaskPool as SoloPool
from celery.exceptions import Reject, WorkerShutdown
from celery.signals import (
    worker_process_init,
    worker_process_shutdown,
    worker_ready,
    worker_shutting_down,
)
from celery.signals import worker_shutdown as worker_stopping

from app.collections.jobs import DELETE_COLLECTION
from app.conversation.pipeline.summary import SUMMARIZE
from app.conversation.pipeline.summary_job import fold_session
from app.ingestion.jobs import INGEST
from app.ingestion.pipeline import SKIPPED, STOPPED
from app.knowledge.languages.job import REBUILD_LEXICAL_INDEX
from app.knowledge.languages.job import rebuild_lexical_index as rebuild
from app.retention.tasks import SWEEP, sweep_job
from app.worker.celery_app import celery_app
from app.worker.runtime import close_worker_runtime, hand_back_ingestions, worker_runtime

logger = logging.getLogger(__name__)


@celery_app.task(name="threadline.ping")
def ping() -> str:
    """A no-op used by health checks and smoke tests."""
    return "pong"


@celery_app.task(name=INGEST, acks_late=True)
def ingest(kind: str, tenant_id: str, object_id: str) -> str:
    """Ingest one document or attachment (retries inside the pipeline). `skipped` when it
    was not this task's to do: already ingested, or held by another live process. Stopped
    by SIGTERM, its message goes back to the broker (`Reject`, requeued)."""
    _hand_back_at_sigterm()
    runtime = worker_runtime()
    if runtime.stopping:
        _give_back_message()
    handler = runtime.run(runtime.ingestion_handlers())[INGEST]

    async def run() -> str:
        return str(await handler(kind=kind, tenant_id=tenant_id, object_id=object_id))

    try:
        status = runtime.run(run())
    except CancelledError:  # cancelled by the hand-back (`stop`)
        if not runtime.stopping:
            raise
        status = STOPPED
    if runtime.stopping and status in (SKIPPED, STOPPED):
        # Not finished here: once the document is handed back (unclaimed), the message goes
        # back to the queue for the next worker. A duplicate of the recovery's job is
        # harmless: the claim lets one process at a time ingest a document.
        runtime.wait_handed_back()
        _give_back_message()
    return status


def _give_back_message() -> None:
    """Return the running task's message to the broker, unacknowledged: rejected and
    requeued, or, in the solo pool, left unacknowledged for the broker connection's close
    to restore. A solo worker runs the task inside its read from the broker and keeps
    reading until that read ends: a message rejected there came straight back to it, and
    was rejected again, for as long as it ran. Ending the worker from the task instead
    (`WorkerShutdown`, which Celery lets through) stops it reading; its warm shutdown then
    restores every message it had not acknowledged, this one too."""
    if _solo:
        raise WorkerShutdown(0)
    raise Reject("the worker is stopping", requeue=True)


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


_consumers: list[Any] = []
"""The worker's consumer (its main process): SIGTERM cancels its consuming at once."""
_solo = False
"""The worker runs the solo pool: its tasks run inside its reads from the broker."""
_prefork_pools: list[PreforkPool] = []
"""The worker's prefork pool, if it runs one: SIGTERM is passed on to its children."""


_child = threading.local()
"""In a prefork child's main thread: `ready` once the child hands back at SIGTERM."""


def _hand_back_at_sigterm() -> None:
    """In a prefork child, before its first ingestion: SIGTERM hands the child's documents
    back. billiard sets the child's SIGTERM to exit at once after `worker_process_init` (the
    message then requeued, but its document held until the lease lapses), hence here, in the
    task, which runs in the child's main thread (where handlers are set)."""
    if getattr(_child, "prefork", False) and not getattr(_child, "ready", False):
        signal.signal(signal.SIGTERM, lambda *_: hand_back_ingestions())
        _child.ready = True


@worker_process_init.connect
def _start_child(**_: Any) -> None:
    # The solo pool sends this signal too, in the worker's main process: there SIGTERM must
    # stay Celery's warm shutdown (which hands back through `_hand_back`); replacing it made
    # a solo worker that had run one task ignore SIGTERM for good.
    if current_process().name == "MainProcess":
        return
    _child.prefork = True  # the child's main thread, which runs its tasks
    _build_in_background()  # a prefork child: its loop, engine and recovery


@worker_ready.connect
def _start_worker(sender: Any = None, **_: Any) -> None:
    # The solo and threads pools run tasks in this process; prefork children have their own.
    global _solo
    _consumers.append(sender)
    pool = getattr(sender, "pool", None)
    _solo = isinstance(pool, SoloPool)
    if isinstance(pool, PreforkPool):
        _prefork_pools.append(pool)
    else:
        _build_in_background()


@worker_shutting_down.connect
def _hand_back(**_: Any) -> None:
    # Sent from the SIGTERM (or SIGINT, SIGQUIT) handler of the worker's main process, where
    # the solo and threads pools run their tasks (prefork children are told in turn);
    # Celery then stops taking messages and waits for the tasks under way, which now end
    # at once.
    for consumer in _consumers:
        # Before any message is rejected back to the queue: still consuming, the worker
        # would take it again at once, reject it again, and never get to exit. (Celery's
        # cold shutdown does the same; kombu defers it past a read under way.)
        task_consumer = getattr(consumer, "task_consumer", None)
        if task_consumer is not None:
            try:
                task_consumer.cancel()
            except Exception:  # the broker is away: nothing will be delivered anyway
                logger.warning("could not stop consuming", exc_info=True)
    hand_back_ingestions()
    for pool in _prefork_pools:  # a container's SIGTERM reaches only this, the main process
        for pid in pool.info.get("processes", []):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)


@worker_process_shutdown.connect
@worker_stopping.connect
def _stop(**_: Any) -> None:
    close_worker_runtime()
