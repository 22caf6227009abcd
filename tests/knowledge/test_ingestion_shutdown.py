"""SIGTERM during a large in-process ingestion (issue 31 item 5): `threadline serve` stops
taking documents, hands the ones it held back (another process takes them at once, not a
lease later) and exits within the grace period, instead of ingesting everything first."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
import uuid

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.core.db import TENANT
from app.ingestion.recovery import recover
from app.ingestion.uploads import from_bytes
from app.knowledge.service import add_document
from app.models import KbDocument
from tests.factories import make_tenant
from tests.knowledge.test_ingestion_recovery import Recorder
from tests.server_process import server_processes

pytestmark = pytest.mark.committed

DOCUMENTS = 400
GRACE = 30.0
"""A container's: what a orchestrator waits after SIGTERM before SIGKILL."""
BODY = " ".join(f"Paragraph {i} of a long handbook about topic {i % 97}." for i in range(4000))


async def _statuses(
    sessionmaker: async_sessionmaker[AsyncSession], tenant: uuid.UUID
) -> dict[str, int]:
    async with sessionmaker() as db, db.begin():
        db.info[TENANT] = tenant
        rows = await db.execute(select(KbDocument.status, func.count()).group_by(KbDocument.status))
        return {status: count for status, count in rows.all()}


async def test_sigterm_during_a_large_ingestion_hands_the_documents_back_and_exits(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession], db: AsyncSession
) -> None:
    tenant = (await make_tenant(db)).id
    await db.commit()
    async with sessionmaker() as session, session.begin():  # uploaded, their jobs lost
        session.info[TENANT] = tenant
        for i in range(DOCUMENTS):
            await add_document(
                session,
                tenant,
                from_bytes(f"Handbook {i}.\n{BODY}".encode(), f"handbook-{i}.txt"),
                title=None,
                external_id=None,
                metadata={},
                created_by=None,
                enqueue=False,
            )
    # The server's start-up scan queues them all at once (no grace), then ingests them with
    # its worker pool; no further scan runs while it lives.
    env = {
        "THREADLINE_INGESTION_PENDING_GRACE_SECONDS": "0",
        "THREADLINE_INGESTION_RECOVERY_SECONDS": "3600",
        "THREADLINE_INGEST_WORKERS": "2",
    }
    with server_processes(settings, 1, **env) as (server,):
        deadline = time.monotonic() + 120
        while (await _statuses(sessionmaker, tenant)).get("ready", 0) < 2:
            assert time.monotonic() < deadline, "no document was ingested"
            await asyncio.sleep(0.2)
        server.signal(signal.SIGTERM)
        sent = time.monotonic()
        try:
            code = await asyncio.to_thread(server.wait, GRACE)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running {GRACE:.0f} s after SIGTERM:\n{server.stderr()[-3000:]}")
        took = time.monotonic() - sent
    print(f"exited {took:.2f} s after SIGTERM")
    assert code == 0, server.stderr()[-3000:]

    statuses = await _statuses(sessionmaker, tenant)
    left = DOCUMENTS - statuses.get("ready", 0)
    assert left > 0, "the ingestion had finished: nothing was interrupted"
    assert statuses.get("failed", 0) == 0, statuses
    # Nothing is left under the stopped process's lease: another process's recovery queues
    # every unfinished document at once, not after the lease (60 s) or the grace (300 s).
    async with sessionmaker() as session, session.begin():
        session.info[TENANT] = tenant
        claimed = await session.scalar(
            select(func.count()).where(KbDocument.claimed_by.is_not(None))
        )
    assert claimed == 0
    runner = Recorder()
    recovered = await recover(sessionmaker, runner, pending_grace=300, max_attempts=3)
    assert len(recovered.requeued) == left
    assert recovered.failed == []
