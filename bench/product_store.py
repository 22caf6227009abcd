"""A migrated database with the product's own ingestion, for benches that load a corpus."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the benches import the application once their database is chosen
    from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

    from app.config import Settings
    from app.embeddings.base import Embedder
    from app.ingestion.pipeline import IngestionDeps


@dataclass
class ProductStore:
    """What a bench ingests through: the settings, engine, sessions, embedder and pipeline."""

    settings: Settings
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    embedder: Embedder
    deps: IngestionDeps


async def open_product_store(
    owner_url: str, embedder_name: str, *, pool_size: int = 10, max_overflow: int = 10
) -> ProductStore:
    """Migrate the database at `owner_url` and open the application's side of it."""
    from app.config import Settings
    from app.core import migrate
    from app.core.database_urls import resolve_database_urls
    from app.core.db import create_engine, create_sessionmaker
    from app.embeddings.factory import build_embedder
    from app.ingestion.pipeline import IngestionDeps

    settings = Settings(database_url=owner_url, embedder=embedder_name)
    urls = resolve_database_urls(settings)
    await migrate.upgrade(settings, urls.owner)
    engine = create_engine(urls.app, pool_size=pool_size, max_overflow=max_overflow)
    sessions = create_sessionmaker(engine)
    embedder = build_embedder(settings)
    # Chunked as configured (THREADLINE_CHUNK_TOKENS, ...): built by hand, the benches chunked
    # at the dataclass's defaults whatever the environment said.
    deps = IngestionDeps.from_settings(settings, sessions, embedder)
    deps.pii_anonymize = False
    return ProductStore(settings, engine, sessions, embedder, deps)


async def add_and_ingest(
    store: ProductStore,
    tenant_id: uuid.UUID,
    text: str,
    *,
    title: str,
    external_id: str,
    metadata: dict[str, Any] | None = None,
) -> tuple[uuid.UUID, str]:
    """Add one knowledge-base document as `threadline ingest` does, then ingest it: its id and
    how it ended (`ready`, ..., or `duplicate` when that text was already there)."""
    from app.core.db import TENANT
    from app.ingestion.pipeline import ingest
    from app.ingestion.uploads import from_bytes
    from app.knowledge.service import add_document

    async with store.sessions() as db, db.begin():
        db.info[TENANT] = tenant_id  # applied as the transaction starts
        document, duplicate = await add_document(
            db,
            tenant_id,
            from_bytes(text.encode(), None),
            title=title,
            external_id=external_id,
            metadata=metadata or {},
            created_by=None,
            enqueue=False,
        )
    if duplicate:
        return document.id, "duplicate"
    return document.id, await ingest(store.deps, "kb", tenant_id, document.id)
