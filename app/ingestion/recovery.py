"""Finds ingestions that were lost and queues them again.

A job lives in a process's memory or in the broker; the document row is the record. The
scan looks, across tenants, for documents `pending` longer than the grace with no claim
(their job vanished: a restart, a lost broker message, a `threadline ingest` cut short) and
for documents `processing` under a lapsed lease (their process died or hung). Each is put
back to `pending` in its tenant's own transaction, by an UPDATE that only touches it while
it is still lost, so of several processes scanning at once exactly one queues it again; a
document interrupted `max_attempts` times ends `failed` with a reason instead of killing
workers for ever. The job goes to the process's runner: in-process on the embedded
default, the Celery broker when one is configured.

Every API process and every worker runs the scan, once at start-up and then periodically.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.db import TENANT
from app.core.jobs import JobRunner
from app.core.periodic import Periodic
from app.ingestion.jobs import ingest_job
from app.ingestion.repository import IngestionRepository, Kind, lost_documents

logger = logging.getLogger(__name__)

SCAN_LIMIT = 500
"""Documents queued again per scan at most; the next scan takes the rest."""


@dataclass
class Recovered:
    """What one recovery scan did: the ingestions queued again and those failed for good."""

    requeued: list[tuple[Kind, uuid.UUID, uuid.UUID]] = field(default_factory=list)
    failed: list[tuple[Kind, uuid.UUID, uuid.UUID]] = field(default_factory=list)


async def _scan(
    sessionmaker: async_sessionmaker[AsyncSession], pending_grace: float
) -> list[tuple[Kind, uuid.UUID, uuid.UUID]]:
    async with sessionmaker() as db, db.begin():
        # Everything found is then changed in the tenant's own scope.
        return await lost_documents(db, pending_grace, SCAN_LIMIT)


async def recover(
    sessionmaker: async_sessionmaker[AsyncSession],
    runner: JobRunner,
    *,
    pending_grace: float,
    max_attempts: int,
) -> Recovered:
    """Queue every lost ingestion again (or fail it, out of attempts); one transaction per
    kind and tenant. Jobs are submitted after their transaction commits."""
    groups: dict[tuple[Kind, uuid.UUID], list[uuid.UUID]] = {}
    for kind, tenant, oid in await _scan(sessionmaker, pending_grace):
        groups.setdefault((kind, tenant), []).append(oid)
    recovered = Recovered()
    for (kind, tenant), ids in groups.items():
        async with sessionmaker() as db, db.begin():
            db.info[TENANT] = tenant
            touched = await IngestionRepository(db, kind, tenant).requeue(
                ids, pending_grace, max_attempts
            )
        for oid, status in touched.items():
            if status == "pending":
                runner.submit(ingest_job(kind, tenant, oid))
                recovered.requeued.append((kind, tenant, oid))
            else:
                recovered.failed.append((kind, tenant, oid))
    if recovered.requeued or recovered.failed:
        logger.warning(
            "lost ingestions recovered",
            extra={
                "requeued": [f"{kind}:{oid}" for kind, _, oid in recovered.requeued],
                "failed": [f"{kind}:{oid}" for kind, _, oid in recovered.failed],
            },
        )
    return recovered


class RecoveryLoop:
    """Runs `recover` at once, then every `interval` seconds, on the running event loop."""

    def __init__(
        self,
        sessionmaker: Callable[[], async_sessionmaker[AsyncSession]],
        runner: JobRunner,
        *,
        interval: float,
        pending_grace: float,
        max_attempts: int,
    ) -> None:
        self._sessionmaker = sessionmaker
        self.runner = runner
        self.interval = interval
        self.pending_grace = pending_grace
        self.max_attempts = max_attempts
        self._timer = Periodic("ingestion recovery scan", interval, self.run_once, at_start=True)

    def start(self) -> None:
        """Start scanning on the running event loop."""
        self._timer.start()

    async def run_once(self) -> Recovered:
        """Run one recovery scan now."""
        return await recover(
            self._sessionmaker(),
            self.runner,
            pending_grace=self.pending_grace,
            max_attempts=self.max_attempts,
        )

    async def stop(self) -> None:
        """Stop scanning and wait for the timer to end."""
        await self._timer.stop()
