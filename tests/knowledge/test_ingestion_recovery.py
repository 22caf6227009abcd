"""Ingestion jobs are durable: the document row is the queue of record. A job lost with its
process is queued again by the recovery (at start-up and periodically), a claim is a lease
renewed while the document is processed, and a document that keeps killing its workers
ends `failed` instead of being retried for ever."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.core.db import TENANT
from app.core.jobs import Job
from app.ingestion.leases import LeaseKeeper
from app.ingestion.pipeline import IngestionDeps, ingest
from app.ingestion.recovery import recover
from app.ingestion.repository import IngestionRepository
from app.ingestion.uploads import from_bytes
from app.knowledge.service import add_document
from app.main import create_app
from app.models import Attachment, KbChunk, KbDocument
from tests.factories import make_tenant, make_user
from tests.knowledge.test_ingestion_batches import GatedEmbedder

pytestmark = pytest.mark.committed

LONG_AGO = datetime(2026, 1, 1, tzinfo=UTC)
DEAD = "gone-host:4242:deadbeef"  # a process that claimed documents, then died


class Recorder:
    """A job runner that only records what it is given."""

    def __init__(self) -> None:
        self.jobs: list[Job] = []

    def submit(self, job: Job) -> None:
        self.jobs.append(job)


async def _add(
    sessionmaker: async_sessionmaker[AsyncSession], tenant: uuid.UUID, body: str, **columns: Any
) -> uuid.UUID:
    """A knowledge-base document with no job, its columns then set as a lost one left them."""
    async with sessionmaker() as db, db.begin():
        db.info[TENANT] = tenant
        document, _ = await add_document(
            db,
            tenant,
            from_bytes(body.encode(), "doc.txt"),
            title=None,
            external_id=None,
            metadata={},
            created_by=None,
            enqueue=False,
        )
        if columns:
            await db.execute(
                update(KbDocument).where(KbDocument.id == document.id).values(**columns)
            )
    return document.id


async def _rows(
    sessionmaker: async_sessionmaker[AsyncSession], model: Any, tenant: uuid.UUID
) -> dict[uuid.UUID, Any]:
    async with sessionmaker() as db, db.begin():
        db.info[TENANT] = tenant
        rows = await db.execute(
            select(
                model.id,
                model.status,
                model.error,
                model.claimed_by,
                model.attempts,
                model.lease_expires_at,
            )
        )
        return {row.id: row for row in rows}


async def _wait_until(check: Any, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not await check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def test_ingestions_lost_by_a_restart_are_recovered_when_the_app_starts(
    sessionmaker: async_sessionmaker[AsyncSession], settings: Settings, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    user = await make_user(db, tenant)
    lost = {
        # queued, but the process holding the job restarted: pending for an hour
        await _add(sessionmaker, tenant.id, "Queued before the restart.", updated_at=LONG_AGO),
        # claimed by a process that died: its lease lapsed
        await _add(
            sessionmaker,
            tenant.id,
            "Half way when the process died.",
            status="processing",
            claimed_by=DEAD,
            lease_expires_at=LONG_AGO,
            attempts=1,
        ),
        # processing since before leases existed (migration 0017): nobody holds it
        await _add(sessionmaker, tenant.id, "Stuck since the upgrade.", status="processing"),
    }
    alive = {
        # just queued by a live process: its job is about to start
        await _add(sessionmaker, tenant.id, "Queued a moment ago."),
        # held by a live process whose lease runs
        await _add(
            sessionmaker,
            tenant.id,
            "Being ingested elsewhere.",
            status="processing",
            claimed_by="live-host:1:cafe",
            lease_expires_at=datetime.now(UTC) + timedelta(hours=1),
            attempts=1,
        ),
    }
    async with sessionmaker() as db, db.begin():
        db.info[TENANT] = tenant.id
        attachment = Attachment(
            tenant_id=tenant.id,
            user_id=user.id,
            content_hash="a" * 64,
            content_type="text/plain",
            source=b"An attachment whose worker died.",
            status="processing",
            claimed_by=DEAD,
            lease_expires_at=LONG_AGO,
            attempts=1,
        )
        db.add(attachment)

    application = create_app(settings)
    async with application.router.lifespan_context(application):

        async def recovered() -> bool:
            documents = await _rows(sessionmaker, KbDocument, tenant.id)
            attachments = await _rows(sessionmaker, Attachment, tenant.id)
            return all(documents[oid].status == "ready" for oid in lost) and (
                attachments[attachment.id].status == "ready"
            )

        await _wait_until(recovered)
        await application.state.resources.jobs.drain()

    documents = await _rows(sessionmaker, KbDocument, tenant.id)
    for oid in lost:
        assert (documents[oid].claimed_by, documents[oid].attempts) == (None, 0)
    assert {documents[oid].status for oid in alive} == {"pending", "processing"}
    async with sessionmaker() as db, db.begin():
        db.info[TENANT] = tenant.id
        chunked = set(await db.scalars(select(KbChunk.document_id).distinct()))
        text = await db.scalar(select(Attachment.text).where(Attachment.id == attachment.id))
    assert chunked == lost
    assert text == "An attachment whose worker died."


async def test_a_document_that_keeps_killing_its_workers_ends_failed(
    sessionmaker: async_sessionmaker[AsyncSession], db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    poison = await _add(
        sessionmaker,
        tenant.id,
        "Every worker dies on this one.",
        status="processing",
        claimed_by=DEAD,
        lease_expires_at=LONG_AGO,
        attempts=3,
    )
    retried = await _add(
        sessionmaker,
        tenant.id,
        "Interrupted once.",
        status="processing",
        claimed_by=DEAD,
        lease_expires_at=LONG_AGO,
        attempts=2,
    )
    runner = Recorder()

    recovered = await recover(sessionmaker, runner, pending_grace=300, max_attempts=3)

    assert [job.kwargs["object_id"] for job in runner.jobs] == [str(retried)]
    assert [oid for _, _, oid in recovered.failed] == [poison]
    documents = await _rows(sessionmaker, KbDocument, tenant.id)
    assert documents[poison].status == "failed"
    assert documents[poison].error == (
        "Ingestion was interrupted 3 times (the process running it stopped each time); "
        "upload it again to retry."
    )
    assert (documents[poison].claimed_by, documents[poison].attempts) == (None, 0)
    assert (documents[retried].status, documents[retried].claimed_by) == ("pending", None)
    assert documents[retried].attempts == 2  # the run it is queued for will be the third

    # Nor does a late or duplicate job claim an exhausted document behind the scan's back.
    async with sessionmaker() as db, db.begin():
        db.info[TENANT] = tenant.id
        await db.execute(
            update(KbDocument)
            .where(KbDocument.id == retried)
            .values(status="processing", claimed_by=DEAD, lease_expires_at=LONG_AGO, attempts=3)
        )
    deps = IngestionDeps(sessionmaker=sessionmaker, embedder=GatedEmbedder(), pii_anonymize=False)
    assert await ingest(deps, "kb", tenant.id, retried) == "skipped"


async def test_processes_scanning_at_once_queue_a_lost_document_once(
    sessionmaker: async_sessionmaker[AsyncSession], db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    oid = await _add(
        sessionmaker,
        tenant.id,
        "Lost once, queued once.",
        status="processing",
        claimed_by=DEAD,
        lease_expires_at=LONG_AGO,
        attempts=1,
    )
    runners = [Recorder() for _ in range(4)]

    await asyncio.gather(
        *(recover(sessionmaker, r, pending_grace=300, max_attempts=3) for r in runners)
    )

    assert [job.kwargs["object_id"] for r in runners for job in r.jobs] == [str(oid)]
    # Queued again, it is pending with its grace restarted: the next scans leave it alone.
    again = Recorder()
    await recover(sessionmaker, again, pending_grace=300, max_attempts=3)
    assert again.jobs == []


async def test_a_claim_is_renewed_while_processed_and_a_lapsed_one_is_not_stored(
    sessionmaker: async_sessionmaker[AsyncSession], db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    oid = await _add(sessionmaker, tenant.id, "A document the model is slow on.")
    embedder = GatedEmbedder()
    embedder.gate.clear()  # the document waits for the model, claimed
    deps = IngestionDeps(
        sessionmaker=sessionmaker, embedder=embedder, pii_anonymize=False, lease_seconds=1.0
    )
    run = asyncio.ensure_future(ingest(deps, "kb", tenant.id, oid))

    async def claimed() -> bool:
        return (await _rows(sessionmaker, KbDocument, tenant.id))[oid].claimed_by is not None

    await _wait_until(claimed)
    first = (await _rows(sessionmaker, KbDocument, tenant.id))[oid]
    assert (first.status, first.claimed_by, first.attempts) == ("processing", deps.leases.owner, 1)
    assert await ingest(deps, "kb", tenant.id, oid) == "skipped"  # a duplicate job here

    async def renewed() -> bool:
        row = (await _rows(sessionmaker, KbDocument, tenant.id))[oid]
        return bool(row.lease_expires_at > first.lease_expires_at)

    await _wait_until(renewed, seconds=10)
    # Another process sees a live lease: nothing to take over.
    assert await ingest(_other_process(sessionmaker), "kb", tenant.id, oid) == "skipped"

    # This process stalls past its lease (simulated: the lease lapses and another process
    # takes the document over); its late result must not overwrite the new owner's work.
    async with sessionmaker() as db, db.begin():
        db.info[TENANT] = tenant.id
        await db.execute(
            update(KbDocument)
            .where(KbDocument.id == oid)
            .values(claimed_by="successor:1:beef", lease_expires_at=func.clock_timestamp())
        )
    embedder.gate.set()
    assert await run == "skipped"
    row = (await _rows(sessionmaker, KbDocument, tenant.id))[oid]
    assert (row.status, row.claimed_by) == ("processing", "successor:1:beef")
    async with sessionmaker() as db, db.begin():
        db.info[TENANT] = tenant.id
        assert await db.scalar(select(func.count()).select_from(KbChunk)) == 0


def _other_process(sessionmaker: async_sessionmaker[AsyncSession]) -> IngestionDeps:
    return IngestionDeps(sessionmaker=sessionmaker, embedder=GatedEmbedder(), pii_anonymize=False)


async def test_a_late_failure_does_not_fail_a_document_requeued_or_stored_meanwhile(
    sessionmaker: async_sessionmaker[AsyncSession], db: AsyncSession
) -> None:
    # The process whose lease lapsed fails its attempt after the recovery queued the document
    # again (unclaimed, pending) or after another process stored it (ready, unclaimed).
    tenant = await make_tenant(db)
    requeued = await _add(sessionmaker, tenant.id, "Queued again.", status="pending")
    stored = await _add(sessionmaker, tenant.id, "Stored by another.", status="ready")
    async with sessionmaker() as db, db.begin():
        db.info[TENANT] = tenant.id
        repository = IngestionRepository(db, "kb", tenant.id)
        for oid in (requeued, stored):
            await repository.fail(oid, DEAD, "late failure of a lapsed claim")

    rows = await _rows(sessionmaker, KbDocument, tenant.id)
    assert (rows[requeued].status, rows[requeued].error) == ("pending", None)
    assert (rows[stored].status, rows[stored].error) == ("ready", None)


async def test_a_renewal_reports_only_leases_another_process_has_now(
    sessionmaker: async_sessionmaker[AsyncSession],
    db: AsyncSession,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A renewal can run between a job's commit and its release of the document: a document
    # stored (ready) or deleted meanwhile has not been lost; one queued again or claimed by
    # another process has.
    tenant = await make_tenant(db)
    keeper = LeaseKeeper(lambda: sessionmaker, seconds=60)
    states: dict[str, dict[str, Any]] = {
        "stored": {"status": "ready", "claimed_by": None},
        "requeued": {"status": "pending", "claimed_by": None},
        "taken over": {"status": "processing", "claimed_by": DEAD, "lease_expires_at": None},
    }
    ids = {
        name: await _add(sessionmaker, tenant.id, name, **columns)
        for name, columns in states.items()
    }
    ids["deleted"] = uuid.uuid4()
    for oid in ids.values():
        keeper.hold("kb", tenant.id, oid)
    keeper.claimed("kb", tenant.id, ids.values())

    with caplog.at_level("WARNING", logger="app.ingestion.leases"):
        await keeper.renew()

    reported = [
        r.__dict__["ids"] for r in caplog.records if r.getMessage() == "ingestion lease lost"
    ]
    assert [sorted(r) for r in reported] == [sorted([str(ids["requeued"]), str(ids["taken over"])])]
    for oid in ids.values():
        keeper.release("kb", tenant.id, oid)


async def test_one_tenants_failed_renewal_does_not_skip_the_others(
    sessionmaker: async_sessionmaker[AsyncSession],
    db: AsyncSession,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    failing, healthy = await make_tenant(db), await make_tenant(db)
    keeper = LeaseKeeper(lambda: sessionmaker, seconds=60)
    soon = datetime.now(UTC) + timedelta(seconds=5)
    held = {
        tenant.id: await _add(
            sessionmaker,
            tenant.id,
            f"held for {tenant.id}",
            status="processing",
            claimed_by=keeper.owner,
            lease_expires_at=soon,
        )
        for tenant in (failing, healthy)
    }
    renew = IngestionRepository.renew

    async def renew_failing_for_one(self: IngestionRepository, *args: Any) -> Any:
        if self.tenant_id == failing.id:
            raise ConnectionResetError("this tenant's renewal failed on its way")
        return await renew(self, *args)

    monkeypatch.setattr(IngestionRepository, "renew", renew_failing_for_one)
    for tenant_id, oid in held.items():  # the failing tenant's group comes first
        keeper.hold("kb", tenant_id, oid)
        keeper.claimed("kb", tenant_id, [oid])
    try:
        await keeper.renew()
    finally:
        for tenant_id, oid in held.items():
            keeper.release("kb", tenant_id, oid)
    async with sessionmaker() as check, check.begin():
        check.info[TENANT] = healthy.id
        lease = await check.scalar(
            select(KbDocument.lease_expires_at).where(KbDocument.id == held[healthy.id])
        )
    assert lease is not None and lease > soon + timedelta(seconds=30)
