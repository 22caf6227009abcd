"""The leases a process holds on the documents it is ingesting, renewed while it works.

The database is the queue of record (docs/adr/0017): a claim writes the process's id and a
lease expiry (on the database's clock) on the document. While the process works, one task
renews every lease it holds, every third of the lease, with one UPDATE per kind and tenant
for all of them, so a long document or a slow model never loses its claim and a short one
costs nothing (it is done before the first renewal). A process that dies or hangs stops
renewing; once its leases lapse, the recovery (`app.ingestion.recovery`) queues the
documents again and any process takes them.

A process that is told to stop (SIGTERM) does not wait for its documents: it stops taking
new ones, cancels the ingestions under way and hands back, in one UPDATE per kind and
tenant, every document it held or had a job for (`hand_off`): unclaimed and counted as not
attempted, so the recovery of any process queues them at its next scan instead of a lease
or a grace later.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Iterable, Iterator

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
        self.stopping = False
        """Set at shutdown: no new claim is taken; what is held is handed back."""
        self._jobs: dict[Held, asyncio.Task[object]] = {}
        self._unfinished: set[Held] = set()
        """Documents whose job ended unfinished while stopping (cancelled, not claimed)."""
        self._claiming = 0

    def hold(self, kind: Kind, tenant: uuid.UUID, oid: uuid.UUID) -> bool:
        """Start renewing the lease this process is about to take; False if this process
        is ingesting the document already (a second job for it has nothing to do) or is
        stopping (the document is handed back with the others)."""
        key = (kind, tenant, oid)
        if self.stopping:
            self._unfinished.add(key)
            return False
        if key in self._held:
            return False
        self._held[key] = False
        task = asyncio.current_task()
        if task is not None:
            self._jobs[key] = task
        loop = asyncio.get_running_loop()
        if self._task is None or self._task.done() or self._task.get_loop() is not loop:
            self._task = loop.create_task(self._renew_while_held())
        return True

    def claimed(self, kind: Kind, tenant: uuid.UUID, ids: Iterable[uuid.UUID]) -> None:
        """The claims on these documents were taken: their leases are renewed from now on."""
        for oid in ids:
            if (kind, tenant, oid) in self._held:
                self._held[(kind, tenant, oid)] = True

    def release(
        self, kind: Kind, tenant: uuid.UUID, oid: uuid.UUID, *, finished: bool = True
    ) -> None:
        """Stop renewing a document's lease (its ingestion has ended; `finished`: ready,
        failed or deleted, else it is handed back at shutdown)."""
        key = (kind, tenant, oid)
        self._held.pop(key, None)
        self._jobs.pop(key, None)
        if self.stopping and not finished:
            self._unfinished.add(key)
        if not self._held and self._task is not None and not self._renewing:
            self._task.cancel()  # asleep: no idle task left behind (a renewing one ends itself)
            self._task = None

    @contextlib.contextmanager
    def claiming(self) -> Iterator[None]:
        """Around a claim's transaction: `hand_off` waits for the claims under way, so none
        commits after the documents were handed back."""
        self._claiming += 1
        try:
            yield
        finally:
            self._claiming -= 1

    def begin_stop(self) -> None:
        """Take no new claim from now on (the process is shutting down)."""
        self.stopping = True

    async def hand_off(self, wait_seconds: float = 5.0) -> int:
        """Stop: cancel the ingestions under way and give back every document this process
        held or had a job for; the number handed back. Bounded by about `wait_seconds` seconds
        of waiting for the jobs to end (and the database's answer)."""
        self.begin_stop()
        jobs = [task for task in self._jobs.values() if not task.done()]
        for task in jobs:
            task.cancel()
        if jobs:
            await asyncio.wait(jobs, timeout=wait_seconds)
        waited = 0.0
        while self._claiming and waited < wait_seconds:  # a claim under way commits first
            await asyncio.sleep(0.01)
            waited += 0.01
        if self._task is not None:
            self._task.cancel()
            self._task = None
        keys = self._unfinished | set(self._held)
        groups: dict[tuple[Kind, uuid.UUID], list[uuid.UUID]] = {}
        for kind, tenant, oid in keys:
            groups.setdefault((kind, tenant), []).append(oid)
        handed = 0
        for (kind, tenant), ids in groups.items():
            try:
                async with self._sessionmaker()() as db, db.begin():
                    db.info[TENANT] = tenant
                    handed += await IngestionRepository(db, kind, tenant).hand_off(ids, self.owner)
            except Exception:  # its leases lapse and the recovery takes them then
                logger.warning("could not hand ingestions back", exc_info=True)
        if handed:
            logger.warning("ingestions handed back at shutdown", extra={"documents": handed})
        return handed

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
