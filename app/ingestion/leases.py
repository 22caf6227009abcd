"""The leases a process holds on the documents it is ingesting, renewed while it works.

The database is the queue of record (docs/adr/0017): a claim writes the process's id and a
lease expiry (on the database's clock) on the document. While the process works, one task
renews every lease it holds, every third of the lease, with one UPDATE per kind and tenant
for all of them, so a long document or a slow model never loses its claim and a short one
costs nothing (it is done before the first renewal). A process that dies or hangs stops
renewing; once its leases lapse, the recovery (`app.ingestion.recovery`) queues the
documents again and any process takes them.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.db import TENANT
from app.core.process import new_owner_id
from app.ingestion.repository import IngestionRepository, Kind

logger = logging.getLogger(__name__)

Held = tuple[Kind, uuid.UUID, uuid.UUID]
"""(kind, tenant, document id)"""


class LeaseKeeper:
    """Renews the ingestion leases this process holds while it works on their documents."""

    def __init__(
        self, sessionmaker: Callable[[], async_sessionmaker[AsyncSession]], seconds: float
    ) -> None:
        """`sessionmaker` is read at each renewal (tests route the app through another)."""
        self.owner = new_owner_id()  # a claim names the pipeline that holds it
        self.seconds = seconds
        self._sessionmaker = sessionmaker
        self._held: dict[Held, bool] = {}
        """Documents this process has a job for; True once the claim is taken."""
        self._task: asyncio.Task[None] | None = None
        self._renewing = False

    def hold(self, kind: Kind, tenant: uuid.UUID, oid: uuid.UUID) -> bool:
        """Start renewing the lease this process is about to take; False if this process
        is ingesting the document already (a second job for it has nothing to do)."""
        key = (kind, tenant, oid)
        if key in self._held:
            return False
        self._held[key] = False
        loop = asyncio.get_running_loop()
        if self._task is None or self._task.done() or self._task.get_loop() is not loop:
            self._task = loop.create_task(self._renew_while_held())
        return True

    def claimed(self, kind: Kind, tenant: uuid.UUID, ids: Iterable[uuid.UUID]) -> None:
        """The claims on these documents were taken: their leases are renewed from now on."""
        for oid in ids:
            if (kind, tenant, oid) in self._held:
                self._held[(kind, tenant, oid)] = True

    def release(self, kind: Kind, tenant: uuid.UUID, oid: uuid.UUID) -> None:
        """Stop renewing a document's lease (its ingestion has ended)."""
        self._held.pop((kind, tenant, oid), None)
        if not self._held and self._task is not None and not self._renewing:
            self._task.cancel()  # asleep: no idle task left behind (a renewing one ends itself)
            self._task = None

    async def _renew_while_held(self) -> None:
        while self._held:
            await asyncio.sleep(self.seconds / 3)
            self._renewing = True
            try:
                await self.renew()
            except Exception:  # the next renewal tries again; the lease has two more thirds
                logger.warning("could not renew ingestion leases", exc_info=True)
            finally:
                self._renewing = False

    async def _renew_group(
        self, kind: Kind, tenant: uuid.UUID, ids: list[uuid.UUID]
    ) -> set[uuid.UUID]:
        """Renew one kind and tenant's leases; the ids missed that are still in flight (held
        by another process now)."""
        async with self._sessionmaker()() as db, db.begin():
            db.info[TENANT] = tenant
            repository = IngestionRepository(db, kind, tenant)
            kept = await repository.renew(ids, self.owner, self.seconds)
            missed = [oid for oid in ids if oid not in kept]
            # A document whose ingestion has just committed (ready, failed) or that was
            # deleted is not held any more, even if its job has not released it yet.
            return await repository.in_flight(missed) if missed else set()

    async def renew(self) -> None:
        """Extend every lease held now: one transaction per kind and tenant."""
        groups: dict[tuple[Kind, uuid.UUID], list[uuid.UUID]] = {}
        for (kind, tenant, oid), taken in list(self._held.items()):
            if taken:  # a job still waiting for its claim has no lease to renew yet
                groups.setdefault((kind, tenant), []).append(oid)
        for (kind, tenant), ids in groups.items():
            try:  # one tenant's failure must not leave the others' leases to lapse
                in_flight = await self._renew_group(kind, tenant, ids)
            except Exception:
                logger.warning("could not renew ingestion leases", exc_info=True)
                continue
            held = self._held
            lost = [str(oid) for oid in in_flight if (kind, tenant, oid) in held]
            if lost:  # its store will be refused; the process that took it over finishes it
                logger.warning("ingestion lease lost", extra={"kind": kind, "ids": lost})
