from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.embeddings.hashing import HashingEmbedder
from app.ingestion.pipeline import IngestionDeps, ingest
from tests.factories import make_tenant
from tests.knowledge.test_ingestion_batches import _add

pytestmark = pytest.mark.committed


@pytest.mark.parametrize("n", [1, 10])
async def test_count(
    sessionmaker: async_sessionmaker[AsyncSession], app_engine: AsyncEngine, db: AsyncSession, n: int
) -> None:
    tenant = await make_tenant(db)
    ids = await _add(sessionmaker, tenant.id, [f"Document {i} about topic {i}." for i in range(n)])
    deps = IngestionDeps(sessionmaker=sessionmaker, embedder=HashingEmbedder(), pii_anonymize=False, retry_delay=0.01)
    seen: list[str] = []
    def listener(conn: Any, cursor: Any, statement: str, *a: Any) -> None:
        seen.append(statement.split()[0])
    event.listen(app_engine.sync_engine, "before_cursor_execute", listener)
    try:
        await asyncio.gather(*(ingest(deps, "kb", tenant.id, oid) for oid in ids))
    finally:
        event.remove(app_engine.sync_engine, "before_cursor_execute", listener)
    print("COUNT", n, len(seen), seen)
