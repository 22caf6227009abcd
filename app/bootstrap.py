"""What every entry point builds from the settings, built one way for all of them.

The API (`app.lifespan`), a Celery worker process (`app.worker.runtime`) and the `threadline`
command (`app.cli`) each need the database (its URLs, one engine, sessions over it), the
configured embedder checked against the vectors already stored, the ingestion pipeline, the
history cache, the ingestion recovery and a way to hand jobs to a worker. They differ only in
sizes (how many connections, whether extraction runs in worker processes) and in how they
react to a database that is not there yet; those are the parameters here.

Below the composition root (`app.resources`, `app.lifespan`), above the domain packages.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.collections.jobs import collection_handlers
from app.config import Settings, get_settings
from app.conversation.history import HistoryStore
from app.conversation.pipeline.summary_job import SummaryDeps, summary_handlers
from app.core.database_urls import DatabaseUrls, resolve_database_urls
from app.core.db import create_engine, create_sessionmaker
from app.core.jobs import CeleryJobs, InProcessJobs, JobRunner
from app.core.redis import RedisHandle
from app.embeddings import factory as embedders
from app.embeddings.space import EmbeddingMismatchError, check_embedding_space
from app.ingestion.jobs import ingestion_handlers
from app.ingestion.offload import PreparePool
from app.ingestion.pipeline import IngestionDeps
from app.ingestion.recovery import RecoveryLoop
from app.knowledge.languages.job import language_handlers
from app.retention.tasks import SWEEP
from app.retrieval.status import KnowledgeBaseStatus

if TYPE_CHECKING:
    from celery import Celery

logger = logging.getLogger(__name__)

TASK_MODULES: list[str] = ["app.worker.tasks"]
"""The modules that register Celery tasks (a worker imports them through `include`)."""


@dataclass
class Database:
    """One process's database: where it connects, its engine and the sessions over it."""

    urls: DatabaseUrls
    engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]

    async def dispose(self) -> None:
        """Close the engine's connections (at shutdown, or when a command ends)."""
        await self.engine.dispose()


async def open_database(settings: Settings, *, pool_size: int, max_overflow: int) -> Database:
    """The database as the application role (row-level security applies), with its engine."""
    # Starting the embedded PostgreSQL blocks for about a second: keep it off the loop.
    urls = await asyncio.to_thread(resolve_database_urls, settings)
    engine = create_engine(urls.app, pool_size=pool_size, max_overflow=max_overflow)
    return Database(urls=urls, engine=engine, sessionmaker=create_sessionmaker(engine))


async def open_ingestion(
    settings: Settings,
    sessionmaker: async_sessionmaker[AsyncSession],
    *,
    preparer: PreparePool | None = None,
    outage_ok: bool = False,
) -> IngestionDeps:
    """The configured embedder and the ingestion pipeline over `sessionmaker`.

    The embedder is checked against the vectors already stored: a different model raises
    `EmbeddingMismatchError` (two models' vectors never mix). With `outage_ok` (the API,
    which starts without PostgreSQL and says so on /readyz) a database that cannot be
    reached is only logged. `preparer`: where extraction runs (default: threads).
    """
    # Through the module: a test's worker replaces `build_embedder` there before this runs.
    embedder = embedders.build_embedder(settings)
    try:
        async with sessionmaker() as db, db.begin():
            await check_embedding_space(db, embedder)
    except EmbeddingMismatchError:
        raise
    except Exception:
        if not outage_ok:
            raise
        logger.warning("could not check the embedding space", exc_info=True)
    return IngestionDeps.from_settings(settings, sessionmaker, embedder, preparer)


def build_history(settings: Settings, redis: RedisHandle) -> HistoryStore:
    """The per-session history cache in Redis, sized by the settings."""
    # Beyond the window, room for the turns waiting for the background summary: a batch,
    # and a batch more while the job runs.
    return HistoryStore(
        redis,
        limit=settings.history_turns,
        ttl_seconds=settings.history_cache_ttl_seconds,
        slack=2 * settings.summary_batch_turns,
    )


def create_celery(settings: Settings | None = None) -> Celery:
    """The Celery application: the API and the recovery publish through it, workers run its
    tasks, beat schedules the retention sweep. Broker: `CELERY_BROKER_URL`, else
    `REDIS_URL`, else an in-memory one (nothing leaves the process)."""
    from celery import Celery

    settings = settings or get_settings()
    broker = settings.celery_broker_url or settings.redis_url or "memory://"
    app = Celery("threadline", broker=broker, include=TASK_MODULES)
    app.conf.update(
        task_acks_late=True,  # a task whose worker dies is redelivered, not lost
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_serializer="json",
        accept_content=["json"],
        timezone="UTC",
        broker_connection_retry_on_startup=True,
        beat_schedule={
            "retention-sweep": {
                "task": SWEEP,
                "schedule": float(settings.retention_sweep_seconds),
            }
        },
    )
    return app


def build_jobs(
    settings: Settings,
    ingestion: IngestionDeps,
    kb_status: KnowledgeBaseStatus | None = None,
    summaries: SummaryDeps | None = None,
) -> InProcessJobs | CeleryJobs:
    """Where jobs go: to the Celery workers when a broker is configured, else to tasks of
    this process that run them with `ingestion` (and fold summaries with `summaries`)."""
    if settings.celery_broker_url:
        return CeleryJobs(create_celery(settings))
    handlers = ingestion_handlers(ingestion, kb_status)
    handlers.update(collection_handlers(ingestion.sessionmaker))
    handlers.update(
        language_handlers(lambda: ingestion.sessionmaker, settings.language_rebuild_batch)
    )
    if summaries is not None:
        handlers.update(summary_handlers(summaries))
    return InProcessJobs(handlers)


def build_recovery(
    settings: Settings,
    sessionmaker: Callable[[], async_sessionmaker[AsyncSession]],
    jobs: JobRunner,
) -> RecoveryLoop:
    """The periodic scan that queues lost ingestions again through `jobs` (not started)."""
    return RecoveryLoop(
        sessionmaker,
        jobs,
        interval=settings.ingestion_recovery_seconds,
        pending_grace=settings.ingestion_pending_grace_seconds,
        max_attempts=settings.ingestion_max_attempts,
    )
