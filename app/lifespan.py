"""Builds the application's resources at start-up and releases them at shutdown."""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from types import FrameType

from fastapi import FastAPI

from app.chat.guards import ChatGuards
from app.chat.leases import TurnLeases
from app.chat.orphans import OrphanFinisher
from app.chat.runner import TurnRunner, drain_background
from app.config import Settings
from app.core.database_urls import resolve_database_urls
from app.core.db import create_engine, create_sessionmaker
from app.core.jobs import CeleryJobs, InProcessJobs
from app.core.redis import build_redis
from app.embeddings.factory import build_embedder
from app.embeddings.space import EmbeddingMismatchError, check_embedding_space
from app.graph.build import build_graph
from app.graph.checkpointer import (
    CheckpointSchemaError,
    TenantScopedSaver,
    check_schema,
    create_pool,
)
from app.graph.context import TurnContext
from app.guardrails.injection import SemanticCheck
from app.guardrails.policy import TenantPolicies
from app.ingestion.jobs import ingestion_handlers
from app.ingestion.offload import PreparePool
from app.ingestion.pipeline import IngestionDeps
from app.ingestion.recovery import RecoveryLoop
from app.llm.providers import build_responder
from app.observability.tracing import build_tracing
from app.resources import Resources
from app.retention.schedule import RetentionScheduler
from app.retrieval.hybrid import FusionSettings, HybridRetriever
from app.turns.history import HistoryStore

logger = logging.getLogger(__name__)


async def build_resources(settings: Settings) -> Resources:
    # Starting the embedded PostgreSQL blocks for about a second: keep it off the loop.
    urls = await asyncio.to_thread(resolve_database_urls, settings)
    engine = create_engine(
        urls.app, pool_size=settings.db_pool_size, max_overflow=settings.db_max_overflow
    )
    sessionmaker = create_sessionmaker(engine)
    redis = build_redis(settings)
    history = HistoryStore(
        redis, limit=settings.history_turns, ttl_seconds=settings.history_cache_ttl_seconds
    )
    pool = create_pool(urls.app_libpq(), settings.checkpoint_pool_size)
    await pool.open(wait=False)
    try:
        await check_schema(pool)
    except CheckpointSchemaError:
        await pool.close()
        raise
    except Exception:  # PostgreSQL down: start anyway, /readyz says so
        logger.warning("could not check the checkpoint schema", exc_info=True)
    embedder = build_embedder(settings)
    try:
        async with sessionmaker() as db, db.begin():
            await check_embedding_space(db, embedder)
    except EmbeddingMismatchError:
        await pool.close()
        raise
    except Exception:
        logger.warning("could not check the embedding space", exc_info=True)
    retriever = HybridRetriever(embedder, FusionSettings.from_settings(settings))
    await SemanticCheck(embedder, settings.guard_injection_embedding_similarity).warm()
    context = TurnContext(
        settings=settings,
        sessionmaker=sessionmaker,
        history=history,
        retriever=retriever,
        responder=build_responder(settings),
        policies=TenantPolicies(settings),
        embedder=embedder,
    )
    ingestion = IngestionDeps.from_settings(
        settings, sessionmaker, embedder, PreparePool(settings.ingest_workers)
    )
    saver = TenantScopedSaver(pool)
    saver.keep_checkpoints = settings.checkpoints_per_thread
    jobs: InProcessJobs | CeleryJobs
    if settings.celery_broker_url:
        from app.worker.celery_app import create_celery

        jobs = CeleryJobs(create_celery(settings))
    else:
        jobs = InProcessJobs(ingestion_handlers(ingestion, context.kb_status))
    guards = ChatGuards.build(redis, settings)
    guards.streams.start_listening()
    finisher = OrphanFinisher(context, guards.streams.buffer, guards.idempotency)
    guards.streams.leases = TurnLeases(context, finisher, guards.streams.running)
    guards.streams.leases.start()
    return Resources(
        settings=settings,
        urls=urls,
        engine=engine,
        sessionmaker=sessionmaker,
        redis=redis,
        history=history,
        checkpoint_pool=pool,
        turn_context=context,
        runner=TurnRunner(build_graph(saver), context, build_tracing(settings)),
        retriever=retriever,
        ingestion=ingestion,
        jobs=jobs,
        guards=guards,
    )


async def release_resources(resources: Resources) -> None:
    streams = resources.guards.streams
    # Live streams end first, as a stop would end them, while Redis and PostgreSQL are
    # still there to take their last event and their turn.
    await streams.drain(resources.settings.shutdown_grace_seconds)
    if streams.leases is not None:
        await streams.leases.stop()
    await streams.close()
    await drain_background()
    await resources.jobs.drain()
    await asyncio.to_thread(resources.ingestion.preparer.shutdown)
    await resources.checkpoint_pool.close()
    await resources.redis.close()
    await resources.engine.dispose()


def _stop_streams_on_signal(resources: Resources) -> Callable[[], None]:
    """On SIGTERM/SIGINT, end the live streams at once, before uvicorn waits for open
    connections to close (it runs the lifespan shutdown only after they have, or after
    --timeout-graceful-shutdown, when it cuts them). uvicorn's own handler still runs: it
    starts the server's shutdown. Returns the function that puts the previous handlers back.
    """
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    loop = asyncio.get_running_loop()
    streams = resources.guards.streams
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

    def handle(sig: int, frame: FrameType | None) -> None:
        loop.call_soon_threadsafe(streams.begin_shutdown)
        handler = previous[signal.Signals(sig)]
        if callable(handler):
            handler(sig, frame)
        elif handler == signal.SIG_DFL and sig == signal.SIGINT:
            raise KeyboardInterrupt

    for sig in previous:
        signal.signal(sig, handle)

    def restore() -> None:
        for sig, handler in previous.items():
            if signal.getsignal(sig) is handle:
                signal.signal(sig, handler)

    return restore


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    resources = await build_resources(settings)
    app.state.resources = resources
    # Celery beat runs the retention sweep when there is a broker; else this process does.
    retention = None
    if not settings.celery_broker_url:
        retention = RetentionScheduler(
            lambda: resources.sessionmaker, resources.history, settings.retention_sweep_seconds
        )
        retention.start()
    # Ingestions lost by a process that stopped are queued again, now and periodically. On
    # the engine's own sessions: a scan never shares a connection with a request.
    sessionmaker = resources.sessionmaker
    recovery = RecoveryLoop(
        lambda: sessionmaker,
        resources.jobs,
        interval=settings.ingestion_recovery_seconds,
        pending_grace=settings.ingestion_pending_grace_seconds,
        max_attempts=settings.ingestion_max_attempts,
    )
    recovery.start()
    logger.info(
        "threadline started",
        extra={
            "env": settings.env,
            "database": "embedded" if settings.embedded_database else "external",
            "redis": "in-process" if resources.redis.in_process else "server",
        },
    )
    serving = getattr(app.state, "serving_process", False)
    restore = _stop_streams_on_signal(resources) if serving else (lambda: None)
    try:
        yield
    finally:
        restore()
        await recovery.stop()
        if retention is not None:
            await retention.stop()
        await release_resources(resources)
        if settings.embedded_database and getattr(app.state, "serving_process", False):
            from app.core.embedded import release_embedded_postgres

            await asyncio.to_thread(release_embedded_postgres)
        logger.info("threadline stopped")
