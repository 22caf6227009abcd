"""`threadline reindex` on a real PostgreSQL: search works before, during (on the old vectors)
and after (on the new ones, of another dimension); a document added meanwhile is re-embedded
too; a process left on the old model neither mixes the spaces nor fails its searches; a
database whose recorded space differs from the configured embedder is refused clearly."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from sqlalchemy import text
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.config import Settings
from app.core import migrate
from app.core.database_urls import resolve_database_urls
from app.core.db import TENANT, create_engine, create_sessionmaker, scope_to_tenant
from app.embeddings.hashing import HashingEmbedder
from app.embeddings.reindex import Reindex
from app.embeddings.space import EmbeddingMismatchError, check_embedding_space
from app.ingestion.pipeline import IngestionDeps, ingest
from app.ingestion.uploads import from_bytes
from app.knowledge.service import add_document
from app.models import Faq
from app.retrieval.hybrid import FusionSettings, HybridRetriever
from app.tenants.service import create_tenant
from tests.conftest import create_database, drop_database, make_settings


class Hashing256(HashingEmbedder):
    """Another model, of another dimension (the vector columns change type)."""

    name = "hashing-256"

    def __init__(self) -> None:
        super().__init__(256)


@dataclass
class Store:
    settings: Settings
    owner: AsyncEngine
    app: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    tenant: uuid.UUID


@pytest.fixture
async def store(pg_admin_url: URL, redis_url: str) -> AsyncIterator[Store]:
    name = f"threadline_reindex_{uuid.uuid4().hex[:10]}"
    settings = make_settings(await create_database(pg_admin_url, name), redis_url)
    urls = resolve_database_urls(settings)
    await migrate.upgrade(settings, urls.owner)
    owner, app = create_engine(urls.owner, pool_size=2), create_engine(urls.app, pool_size=4)
    sessions = create_sessionmaker(app)
    async with sessions() as db, db.begin():
        await check_embedding_space(db, HashingEmbedder(384))
        tenant = await create_tenant(db, "acme")
    yield Store(settings, owner, app, sessions, tenant.id)
    await owner.dispose()
    await app.dispose()
    await drop_database(pg_admin_url, name)


async def _add(store: Store, deps: IngestionDeps, title: str, body: str) -> str:
    async with store.sessions() as db, db.begin():
        db.info[TENANT] = store.tenant
        document, _ = await add_document(
            db,
            store.tenant,
            from_bytes(body.encode(), None),
            title=title,
            external_id=title,
            metadata={},
            created_by=None,
            enqueue=False,
        )
    return await ingest(deps, "kb", store.tenant, document.id)


async def _titles(store: Store, retriever: HybridRetriever, query: str, leg: str) -> list[str]:
    async with store.sessions() as db, db.begin():
        await scope_to_tenant(db, store.tenant)
        hits = await retriever.search_hits(db, store.tenant, query, k=3, legs=(leg,))  # type: ignore[arg-type]
    return [hit.passage.title for hit in hits]


async def test_reindex_switches_spaces_and_search_works_throughout(store: Store) -> None:
    old, new = HashingEmbedder(384), Hashing256()
    deps = IngestionDeps(sessionmaker=store.sessions, embedder=old, pii_anonymize=False)
    for title, body in [
        ("Parental leave", "Parents get twenty weeks of paid leave."),
        ("Expenses", "Receipts are filed within a month."),
        ("Laptops", "Each starter receives a laptop."),
    ]:
        assert await _add(store, deps, title, body) == "ready"
    async with store.sessions() as db, db.begin():
        db.info[TENANT] = store.tenant
        faq = Faq(tenant_id=store.tenant, id=uuid.uuid4(), question="Opening hours?", answer="9-5")
        faq.embedding = (await old.embed([faq.question]))[0]
        db.add(faq)
    fusion = FusionSettings()
    before, after = HybridRetriever(old, fusion), HybridRetriever(new, fusion)
    assert (await _titles(store, before, "paid leave for parents", "dense"))[0] == "Parental leave"

    job = Reindex(create_sessionmaker(store.owner), store.owner, new)
    assert await job.start() == (4, 0)  # three chunks and the FAQ
    assert await job.fill(max_batches=1) == 3  # the chunks: one batch
    # During: the old vectors still serve the old model's searches, and ingestion goes on.
    assert (await _titles(store, before, "paid leave for parents", "dense"))[0] == "Parental leave"
    assert await _add(store, deps, "Bicycles", "Cycle to work with a bicycle scheme.") == "ready"
    await job.fill()
    await job.finish()

    async with store.sessions() as db, db.begin():
        dimension = await db.scalar(
            text(
                "SELECT atttypmod FROM pg_attribute "
                "WHERE attrelid = 'kb_chunks'::regclass AND attname = 'embedding'"
            )
        )
        assert dimension == 256
        await check_embedding_space(db, new)  # the new model is on record
        with pytest.raises(EmbeddingMismatchError, match="threadline reindex"):
            await check_embedding_space(db, old)
    async with store.owner.connect() as connection:
        missing = await connection.scalar(
            text(
                "SELECT (SELECT count(*) FROM kb_chunks WHERE embedding IS NULL)"
                " + (SELECT count(*) FROM faqs WHERE embedding IS NULL)"
            )
        )
        indexes = await connection.scalar(
            text("SELECT count(*) FROM pg_indexes WHERE indexname = 'ix_kb_chunks_embedding_hnsw'")
        )
    assert (missing, indexes) == (0, 1)
    # After: the new model's searches find every document, the one added meanwhile too.
    assert (await _titles(store, after, "paid leave for parents", "dense"))[0] == "Parental leave"
    assert (await _titles(store, after, "bicycle scheme", "dense"))[0] == "Bicycles"
    # A process still on the old model searches by words only, never with mixed vectors.
    assert await _titles(store, before, "paid leave for parents", "dense") == []
    assert (await _titles(store, before, "bicycle scheme", "lexical"))[0] == "Bicycles"
    # ... and its ingestions do not store old-space vectors into the new column.
    deps.retry_delay = 0
    assert await _add(store, deps, "Parking", "Parking spaces are booked a day ahead.") == "failed"


async def test_the_command_re_embeds_into_the_configured_space(store: Store) -> None:
    from app.cli.reindex import reindex_database

    deps = IngestionDeps(
        sessionmaker=store.sessions, embedder=HashingEmbedder(384), pii_anonymize=False
    )
    assert await _add(store, deps, "Parental leave", "Twenty weeks.") == "ready"
    model, previous, rows = await reindex_database(store.settings)  # hashing again: titles
    assert (model, previous, rows) == ("hashing-v1", "hashing-v1", 1)


async def test_an_unset_embedder_keeps_the_model_on_record(store: Store) -> None:
    from app.embeddings.space import keep_recorded_embedder

    # The store was filled with hashing; the default is onnx. Unset: the database keeps
    # hashing (an install made before the default changed still starts and searches).
    unset = store.settings.model_copy()
    unset.__pydantic_fields_set__.discard("embedder")
    assert unset.embedder == "hashing"  # make_settings pins it; pretend it was not set
    default = unset.model_copy(update={"embedder": "onnx"})
    default.__pydantic_fields_set__.discard("embedder")

    kept = await keep_recorded_embedder(default, store.sessions)
    assert (kept.embedder, kept.embedding_dim) == ("hashing", 384)
    async with store.sessions() as db, db.begin():  # and the start-up check agrees
        from app.embeddings.factory import build_embedder

        await check_embedding_space(db, build_embedder(kept))

    # Set explicitly: left as asked, for the start-up check to refuse with its advice.
    explicit = store.settings.model_copy(update={"embedder": "onnx"})
    assert (await keep_recorded_embedder(explicit, store.sessions)).embedder == "onnx"


def test_model_names_on_record_map_to_their_settings() -> None:
    from app.embeddings.space import settings_for_model

    assert settings_for_model("hashing-v1", 256) == {"embedder": "hashing", "embedding_dim": 256}
    assert settings_for_model("all-MiniLM-L6-v2-onnx-int8", 384) == {
        "embedder": "onnx",
        "embedding_dim": 384,
    }
    assert settings_for_model("openai/text-embedding-3-small", 1536) == {
        "embedder": "openai",
        "embedding_model": "text-embedding-3-small",
        "embedding_dim": 1536,
    }
    assert settings_for_model("someone-elses-model", 384) is None
