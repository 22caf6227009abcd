"""Concurrent ingestions share their claim and index-write transactions; a document that
fails or disappears in a shared batch does so alone."""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from sqlalchemy import event, select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.core.db import TENANT
from app.embeddings.hashing import HashingEmbedder
from app.ingestion.pipeline import IngestionDeps, ingest
from app.ingestion.uploads import from_bytes
from app.knowledge.service import add_document
from app.models import KbChunk, KbDocument
from tests.factories import make_tenant

pytestmark = pytest.mark.committed


class GatedEmbedder(HashingEmbedder):
    """The hashing embedder that waits for `gate` and answers NaN for texts with "poison"
    (pgvector refuses NaN: the document cannot be stored)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.gate.set()

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        await self.gate.wait()
        vectors = await super().embed(texts)
        poisoned = ["poison" in text for text in texts]
        return [[math.nan] * len(v) if bad else v for bad, v in zip(poisoned, vectors, strict=True)]


async def _add(
    sessionmaker: async_sessionmaker[AsyncSession], tenant_id: uuid.UUID, bodies: list[str]
) -> list[uuid.UUID]:
    ids = []
    for body in bodies:
        async with sessionmaker() as db, db.begin():
            db.info[TENANT] = tenant_id
            document, _ = await add_document(
                db,
                tenant_id,
                from_bytes(body.encode(), "doc.txt"),
                title=None,
                external_id=None,
                metadata={},
                created_by=None,
                enqueue=False,
            )
            ids.append(document.id)
    return ids


async def _documents(
    sessionmaker: async_sessionmaker[AsyncSession], tenant_id: uuid.UUID
) -> tuple[dict[uuid.UUID, tuple[str, str | None]], dict[uuid.UUID, list[str]]]:
    """Each document's status and error, and the texts of its chunks."""
    async with sessionmaker() as db, db.begin():
        db.info[TENANT] = tenant_id
        rows = await db.execute(select(KbDocument.id, KbDocument.status, KbDocument.error))
        chunks = await db.execute(select(KbChunk.document_id, KbChunk.text))
    texts: dict[uuid.UUID, list[str]] = {}
    for document_id, chunk_text in chunks:
        texts.setdefault(document_id, []).append(chunk_text)
    return {oid: (status, error) for oid, status, error in rows}, texts


def _deps(sessionmaker: async_sessionmaker[AsyncSession], embedder: Any) -> IngestionDeps:
    return IngestionDeps(
        sessionmaker=sessionmaker, embedder=embedder, pii_anonymize=False, retry_delay=0.01
    )


async def test_concurrent_ingestions_share_transactions_and_each_keeps_its_own_chunks(
    sessionmaker: async_sessionmaker[AsyncSession], app_engine: AsyncEngine, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    bodies = [f"Document {i} is about the topic number {i}." for i in range(12)]
    ids = await _add(sessionmaker, tenant.id, bodies)
    deps = _deps(sessionmaker, HashingEmbedder())
    transactions = []
    listener = lambda connection: transactions.append(connection)  # noqa: E731
    event.listen(app_engine.sync_engine, "begin", listener)
    try:
        statuses = await asyncio.gather(*(ingest(deps, "kb", tenant.id, oid) for oid in ids))
    finally:
        event.remove(app_engine.sync_engine, "begin", listener)

    assert statuses == ["ready"] * 12
    _, chunks = await _documents(sessionmaker, tenant.id)
    assert [chunks[oid] for oid in ids] == [[body] for body in bodies]
    # One claim and one index write per document would be 24 transactions.
    assert len(transactions) <= 6, len(transactions)


async def test_a_document_that_cannot_be_stored_fails_alone(
    sessionmaker: async_sessionmaker[AsyncSession],
    db: AsyncSession,
    caplog: pytest.LogCaptureFixture,
) -> None:
    tenant = await make_tenant(db)
    bodies = [f"Healthy document {i}." for i in range(5)] + ["A poison document."]
    ids = await _add(sessionmaker, tenant.id, bodies)
    embedder = GatedEmbedder()
    embedder.gate.clear()  # every document waits for the model: they reach the store together
    deps = _deps(sessionmaker, embedder)
    runs = [asyncio.ensure_future(ingest(deps, "kb", tenant.id, oid)) for oid in ids]
    await asyncio.sleep(0.2)
    embedder.gate.set()
    statuses = await asyncio.gather(*runs)

    assert statuses == ["ready"] * 5 + ["failed"]
    failed_attempts = [r for r in caplog.records if r.getMessage() == "ingestion attempt failed"]
    # The poisoned batch was retried document by document: the healthy ones never failed.
    assert {getattr(r, "id", None) for r in failed_attempts} == {str(ids[-1])}
    documents, chunks = await _documents(sessionmaker, tenant.id)
    assert documents[ids[-1]][0] == "failed"
    assert "after 3 attempts" in (documents[ids[-1]][1] or "")
    assert ids[-1] not in chunks
    assert all(chunks[oid] == [body] for oid, body in zip(ids[:5], bodies[:5], strict=True))


async def test_a_document_deleted_during_ingestion_leaves_its_batch_unharmed(
    sessionmaker: async_sessionmaker[AsyncSession], db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    bodies = [f"Kept document {i}." for i in range(4)] + ["Deleted while embedding."]
    ids = await _add(sessionmaker, tenant.id, bodies)
    embedder = GatedEmbedder()
    embedder.gate.clear()
    deps = _deps(sessionmaker, embedder)
    runs = [asyncio.ensure_future(ingest(deps, "kb", tenant.id, oid)) for oid in ids]
    await asyncio.sleep(0.2)  # all claimed, all waiting for the model
    async with sessionmaker() as db, db.begin():
        db.info[TENANT] = tenant.id
        gone = await db.get(KbDocument, (tenant.id, ids[-1]))
        await db.delete(gone)
    embedder.gate.set()
    statuses = await asyncio.gather(*runs)

    assert statuses == ["ready"] * 4 + ["deleted"]
    documents, chunks = await _documents(sessionmaker, tenant.id)
    assert set(documents) == set(ids[:4])
    assert set(chunks) == set(ids[:4])  # no orphan chunks of the deleted document
