"""Worker tasks: the same jobs the in-process runner runs, in a Celery worker."""

from __future__ import annotations

import asyncio

from app.ingestion.jobs import INGEST
from app.worker.celery_app import celery_app


@celery_app.task(name="threadline.ping")
def ping() -> str:
    """A no-op used by health checks and smoke tests."""
    return "pong"


@celery_app.task(name=INGEST, acks_late=True)
def ingest(kind: str, tenant_id: str, object_id: str) -> str:
    """Ingest one document or attachment (retries inside the pipeline)."""
    return asyncio.run(_ingest(kind, tenant_id, object_id))


async def _ingest(kind: str, tenant_id: str, object_id: str) -> str:
    from app.config import get_settings
    from app.core.database_urls import resolve_database_urls
    from app.core.db import create_engine, create_sessionmaker
    from app.embeddings.factory import build_embedder
    from app.embeddings.space import check_embedding_space
    from app.ingestion.jobs import ingestion_handlers
    from app.ingestion.pipeline import IngestionDeps

    settings = get_settings()
    engine = create_engine(resolve_database_urls(settings).app, pool_size=2, max_overflow=0)
    try:
        sessions = create_sessionmaker(engine)
        embedder = build_embedder(settings)
        async with sessions() as db, db.begin():
            await check_embedding_space(db, embedder)  # never mix vectors of two models
        deps = IngestionDeps(
            sessionmaker=sessions,
            embedder=embedder,
            pii_anonymize=settings.pii_anonymize,
            chunk_tokens=settings.chunk_tokens,
            chunk_overlap=settings.chunk_overlap_tokens,
            max_chars=settings.max_document_chars,
            max_pages=settings.max_pdf_pages,
        )
        handler = ingestion_handlers(deps)[INGEST]
        result: str = await handler(kind=kind, tenant_id=tenant_id, object_id=object_id)
        return result
    finally:
        await engine.dispose()
