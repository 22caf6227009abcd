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

from app.bootstrap import (
    build_history,
    build_jobs,
    build_recovery,
    open_database,
    open_ingestion,
)
from app.config import Settings
from app.conversation.checkpoints.checkpointer import (
    CheckpointSchemaError,
    TenantScopedSaver,
    check_schema,
    create_pool,
)
from app.conversation.durability.guards import ChatGuards
from app.conversation.durability.leases import TurnLeases
from app.conversation.durability.orphans import OrphanFinisher
from app.conversation.pipeline.build import build_graph
from app.conversation.pipeline.context import TurnContext
from app.conversation.pipeline.runner import TurnRunner, drain_background
from app.core.redis import build_redis, warn_if_evicting
from app.embeddings.space import EmbeddingMismatchError, keep_recorded_embedder
from app.guardrails import conversation_checks
from app.guardrails.injection import SemanticCheck
from app.guardrails.policy import TenantPolicies
from app.ingestion.offload import PreparePool
from app.ingestion.pipeline import stop as stop_ingestion
from app.llm.providers import build_fast_responder, build_responder
from app.llm.tokens import count_tokens
from app.observability.tracing import build_tracing
from app.resources import Resources
from app.retention.schedule import RetentionScheduler
from app.retrieval.hybrid import FusionSettings, HybridRetriever
from app.retrieval.tenant_indexes.maintenance import TenantIndexScheduler

logger = logging.getLogger(__name__)


async def build_resources(settings: Settings) -> Resources:
    """Everything the running application holds, built once at start-up."""
    database = await open_database(
        settings, pool_size=settings.db_pool_size, max_overflow=settings.db_max_overflow
    )
    db_sessions = database.sessionmaker
    settings = await keep_recorded_embedder(settings, db_sessions)
    redis = build_redis(settings)
    await warn_if_evicting(redis)
    history = build_history(settings, redis)
    pool = create_pool(database.urls.app_libpq(), settings.checkpoint_pool_size)
    await pool.open(wait=False)
    try:
        await check_schema(pool)
    except CheckpointSchemaError:
        await pool.close()
        raise
    except Exception:  # PostgreSQL down: start anyway, /readyz says so
        logger.warning("could not check the checkpoint schema", exc_info=True)
    try:
        ingestion = await open_ingestion(
            settings, db_sessions, preparer=PreparePool(settings.ingest_workers), outage_ok=True
        )
    except EmbeddingMismatchError:
        await pool.close()
        raise
    embedder = ingestion.embedder
    retriever = HybridRetriever(embedder, FusionSettings.from_settings(settings))
    await SemanticCheck(embedder, settings.guard_injection_embedding_similarity).warm()
    context = TurnContext(
        settings=settings,
        sessionmaker=db_sessions,
        history=history,
        retriever=retriever,
        responder=build_responder(settings, embedder=embedder),
        policies=TenantPolicies(settings),
        embedder=embedder,
        rewriter=build_fast_responder(settings),
    )
    saver = TenantScopedSaver(pool)
    saver.keep_checkpoints = settings.checkpoints_per_thread
    # The summary job reads the context's responder when it runs (tests may swap it).
    jobs = build_jobs(settings, ingestion, context.kb_status, summaries=context)
    context.jobs = jobs
    guards = ChatGuards.build(redis, settings)
    guards.streams.start_listening()
    finisher = OrphanFinisher(context, guards.streams.buffer, guards.idempotency)
    guards.leases = TurnLeases(context, finisher, guards.streams.running, claims=guards.idempotency)
    guards.leases.start()
    return Resources(
        settings=settings,
        urls=database.urls,
        engine=database.engine,
        sessionmaker=db_sessions,
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
    """Shut down what `build_resources` built: streams first, then jobs, pools and Redis."""
    streams = resources.guards.streams
    # Ingestion takes no new document from now on; what it holds is handed back below.
    resources.ingestion.leases.begin_stop()
    # Live streams end first, as a stop would end them, while Redis and PostgreSQL are
    # still there to take their last event and their turn.
    await streams.drain(resources.settings.shutdown_grace_seconds)
    if resources.guards.leases is not None:
        await resources.guards.leases.stop()
    await streams.close()
    await drain_background()
    # Not drained: a large ingestion would hold the process for minutes (issue 31). Its
    # documents go back to the queue for another process, at once.
    await stop_ingestion(resources.ingestion)
    await resources.jobs.drain()
    await asyncio.to_thread(resources.ingestion.preparer.shutdown)
    await asyncio.to_thread(conversation_checks.shutdown)
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

    leases = resources.ingestion.leases

    def handle(sig: int, frame: FrameType | None) -> None:
        loop.call_soon_threadsafe(streams.begin_shutdown)
        loop.call_soon_threadsafe(leases.begin_stop)  # no new document from now on
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
    """The API process's lifetime: build the resources and background loops, then release them."""
    settings: Settings = app.state.settings
    resources = await build_resources(settings)
    app.state.resources = resources
    # tiktoken's tables load once per process, off the loop: the first turn's token count
    # held every other request for ~0.2 s (py-spy under bench.attacks).
    await asyncio.to_thread(count_tokens, "warm")
    # Celery beat runs the retention sweep when there is a broker; else this process does.
    retention = None
    if not settings.celery_broker_url:
        retention = RetentionScheduler(
            lambda: resources.sessionmaker, resources.history, settings.retention_sweep_seconds
        )
        retention.start()
    # Ingestions lost by a process that stopped are queued again, now and periodically. On
    # the engine's own database sessions: a scan never shares a connection with a request.
    db_sessions = resources.sessionmaker
    recovery = build_recovery(settings, lambda: db_sessions, resources.jobs)
    recovery.start()
    tenant_indexes = None
    if settings.retrieval_tenant_index_seconds > 0:
        tenant_indexes = TenantIndexScheduler(
            resources.urls.owner,
            settings.retrieval_tenant_index_seconds,
            settings.retrieval_tenant_index_min_chunks,
            settings.retrieval_tenant_index_build_memory,
        )
        tenant_indexes.start()
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
        if tenant_indexes is not None:
            await tenant_indexes.stop()
        if retention is not None:
            await retention.stop()
        await release_resources(resources)
        if settings.embedded_database and getattr(app.state, "serving_process", False):
            from app.core.embedded import release_embedded_postgres

            await asyncio.to_thread(release_embedded_postgres)
        logger.info("threadline stopped")
