"""Builds the application's resources at start-up and releases them at shutdown."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from app.chat.guards import ChatGuards
from app.chat.history import HistoryStore
from app.chat.runner import TurnRunner, drain_background
from app.config import Settings
from app.core.database_urls import resolve_database_urls
from app.core.db import create_engine, create_sessionmaker
from app.core.jobs import CeleryJobs, InProcessJobs
from app.core.redis import build_redis
from app.core.resources import Resources
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
from app.guardrails.policy import TenantPolicies
from app.ingestion.jobs import ingestion_handlers
from app.ingestion.offload import PreparePool
from app.ingestion.pipeline import IngestionDeps
from app.llm.providers import build_responder
from app.observability.tracing import build_tracing
from app.retention.schedule import RetentionScheduler
from app.retrieval.hybrid import FusionSettings, HybridRetriever

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
    context = TurnContext(
        settings=settings,
        sessionmaker=sessionmaker,
        history=history,
        retriever=retriever,
        responder=build_responder(settings),
        policies=TenantPolicies(settings),
        embedder=embedder,
    )
    ingestion = IngestionDeps(
        sessionmaker=sessionmaker,
        embedder=embedder,
        pii_anonymize=settings.pii_anonymize,
        chunk_tokens=settings.chunk_tokens,
        chunk_overlap=settings.chunk_overlap_tokens,
        max_chars=settings.max_document_chars,
        max_pages=settings.max_pdf_pages,
        preparer=PreparePool(settings.ingest_workers),
    )
    saver = TenantScopedSaver(pool)
    saver.keep_checkpoints = settings.checkpoints_per_thread
    jobs: InProcessJobs | CeleryJobs
    if settings.celery_broker_url:
        jobs = CeleryJobs()
    else:
        jobs = InProcessJobs(ingestion_handlers(ingestion, context.kb_status))
    guards = ChatGuards.build(redis, settings)
    guards.streams.start_listening()
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
    await resources.guards.streams.close()
    await drain_background()
    await resources.jobs.drain()
    await asyncio.to_thread(resources.ingestion.preparer.shutdown)
    await resources.checkpoint_pool.close()
    await resources.redis.close()
    await resources.engine.dispose()


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    resources = await build_resources(settings)
    app.state.resources = resources
    # Celery beat runs the retention sweep when there is a broker; else this process does.
    retention = None
    if not settings.celery_broker_url:
        retention = RetentionScheduler(resources, settings.retention_sweep_seconds)
        retention.start()
    logger.info(
        "threadline started",
        extra={
            "env": settings.env,
            "database": "embedded" if settings.embedded_database else "external",
            "redis": "in-process" if resources.redis.in_process else "server",
        },
    )
    try:
        yield
    finally:
        if retention is not None:
            await retention.stop()
        await release_resources(resources)
        if settings.embedded_database and getattr(app.state, "serving_process", False):
            from app.core.embedded import release_embedded_postgres

            await asyncio.to_thread(release_embedded_postgres)
        logger.info("threadline stopped")
