"""A knowledge-base document's status history (ADR 0088): every status write records one
event in the same statement; the admin reads them newest first; ingestion costs no
statement more."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from sqlalchemy import event, select, update
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.core.db import TENANT
from app.embeddings.hashing import HashingEmbedder
from app.ingestion.pipeline import IngestionDeps, ingest
from app.ingestion.repository import IngestionRepository
from app.knowledge.repository import DocumentRepository
from app.models import KbDocument, KbDocumentEvent
from tests.factories import make_tenant
from tests.knowledge.test_ingestion_batches import _add

pytestmark = pytest.mark.committed


def _deps(sessionmaker: async_sessionmaker[AsyncSession]) -> IngestionDeps:
    return IngestionDeps(
        sessionmaker=sessionmaker,
        embedder=HashingEmbedder(),
        pii_anonymize=False,
        retry_delay=0.01,
    )


async def _events(
    sessionmaker: async_sessionmaker[AsyncSession], tenant: uuid.UUID, oid: uuid.UUID
) -> list[tuple[str, str | None]]:
    async with sessionmaker() as db, db.begin():
        db.info[TENANT] = tenant
        rows = await db.execute(
            select(KbDocumentEvent.status, KbDocumentEvent.detail)
            .where(KbDocumentEvent.document_id == oid)
            .order_by(KbDocumentEvent.created_at)
        )
        return [(status, detail) for status, detail in rows]


async def test_ingestion_records_each_status_in_no_more_statements(
    sessionmaker: async_sessionmaker[AsyncSession], app_engine: AsyncEngine, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    ids = await _add(sessionmaker, tenant.id, [f"Document {i} about topic {i}." for i in range(10)])
    statements: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        statements.append(statement)

    event.listen(app_engine.sync_engine, "before_cursor_execute", count)
    try:
        deps = _deps(sessionmaker)
        statuses = await asyncio.gather(*(ingest(deps, "kb", tenant.id, oid) for oid in ids))
    finally:
        event.remove(app_engine.sync_engine, "before_cursor_execute", count)

    assert statuses == ["ready"] * 10
    for oid in ids:
        assert await _events(sessionmaker, tenant.id, oid) == [
            ("pending", "added"),
            ("processing", "attempt 1"),
            ("ready", "1 chunk"),
        ]
    # Measured before the history: 8 statements for the batch (claim and store, each with
    # the tenant setting and the model check); the events ride in the claim and the store.
    assert len(statements) <= 8, statements


async def test_a_failure_a_recovery_and_an_upload_again_are_recorded(
    sessionmaker: async_sessionmaker[AsyncSession], db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    (oid,) = await _add(sessionmaker, tenant.id, ["A document that will be lost."])
    async with sessionmaker() as session, session.begin():
        session.info[TENANT] = tenant.id
        repository = IngestionRepository(session, "kb", tenant.id)
        assert list(await repository.claim([oid], "gone-process", 60.0, 3)) == [oid]
        assert await repository.hand_off([oid], "gone-process") == 1
        assert await repository.requeue([oid], 0.0, 3) == {oid: "pending"}
        await repository.claim([oid], "worker", 60.0, 3)
        await repository.fail(oid, "worker", "The file is missing.")
        await repository.fail(oid, "worker", "twice")  # not its to fail any more: no event
    assert await _events(sessionmaker, tenant.id, oid) == [
        ("pending", "added"),
        ("processing", "attempt 1"),
        ("processing", "handed back by a stopping process, to be queued again"),
        ("pending", "queued again: the process ingesting it stopped or the job was lost"),
        ("processing", "attempt 1"),
        ("failed", "The file is missing."),
    ]

    # Uploading the same file again retries it (what `add_document` does for a duplicate).
    async with sessionmaker() as session, session.begin():
        session.info[TENANT] = tenant.id
        documents = DocumentRepository(session, tenant.id)
        document = await documents.get(oid)
        assert document is not None
        await documents.requeue_failed(document)
        assert (document.status, document.error) == ("pending", None)
        stored = await session.scalar(select(KbDocument.status).where(KbDocument.id == oid))
    assert stored == "pending"
    events = await _events(sessionmaker, tenant.id, oid)
    assert events[-1] == ("pending", "uploaded again after failing")

    # Uploaded again once more while it waits: it is not failed, nothing is written.
    async with sessionmaker() as session, session.begin():
        session.info[TENANT] = tenant.id
        documents = DocumentRepository(session, tenant.id)
        document = await documents.get(oid)
        assert document is not None
        await documents.requeue_failed(document)
    assert await _events(sessionmaker, tenant.id, oid) == events


async def test_a_document_out_of_attempts_fails_with_its_reason(
    sessionmaker: async_sessionmaker[AsyncSession], db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    (oid,) = await _add(sessionmaker, tenant.id, ["A document that kills its workers."])
    async with sessionmaker() as session, session.begin():
        session.info[TENANT] = tenant.id
        repository = IngestionRepository(session, "kb", tenant.id)
        await repository.claim([oid], "first", 60.0, 1)
        await repository.hand_off([oid], "nobody")  # the claim stays: its lease lapses
        await session.execute(
            update(KbDocument)
            .where(KbDocument.id == oid)
            .values(lease_expires_at=None, attempts=1)
            .execution_options(synchronize_session=False)
        )
        assert await repository.requeue([oid], 0.0, 1) == {oid: "failed"}
    status, detail = (await _events(sessionmaker, tenant.id, oid))[-1]
    assert status == "failed"
    assert detail is not None and detail.startswith("Ingestion was interrupted 1 times")
