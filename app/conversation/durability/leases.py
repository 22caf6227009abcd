"""Leases on running turns: renewed by the process that runs them, swept by every process.

A turn is admitted with a lease owned by its process (`query_history.lease_owner`,
`lease_expires_at`, docs/adr/0016). While the process runs it, it renews the leases of all
its running turns every `THREADLINE_TURN_LEASE_RENEW_SECONDS`, one statement per tenant. A
process that dies stops renewing; once a pending turn's lease has expired, the sweep of any
process (at start-up and every `THREADLINE_TURN_SWEEP_SECONDS`), a resuming client or a stop
finishes it (app/conversation/durability/orphans.py). The same renewal keeps the running turns'
Idempotency-Key
claims (app/conversation/durability/idempotency.py) from lapsing under a turn that outlasts their
lifetime.
"""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict
from collections.abc import Callable, Collection

from app.conversation.durability.idempotency import IdempotencyStore
from app.conversation.durability.orphans import OrphanFinisher
from app.conversation.pipeline.context import TurnContext
from app.conversation.repository.turn_leases import Lease, TurnLeaseRepository, expired_leases
from app.core.db import TENANT
from app.core.periodic import Periodic

logger = logging.getLogger(__name__)

SWEEP_BATCH = 100
"""Orphans finished per sweep (bounded work; the rest wait for the next one)."""


class TurnLeases:
    """The leases of this process's running turns: renewal, the orphan sweep, settling."""

    def __init__(
        self,
        context: TurnContext,
        finisher: OrphanFinisher,
        running: Callable[[], Collection[tuple[uuid.UUID, uuid.UUID]]],
        claims: IdempotencyStore,
    ) -> None:
        """`running` lists (tenant, turn) of the turns this process runs now; their
        Idempotency-Key claims in `claims` are renewed with their leases."""
        self.context = context
        self.claims = claims
        # The background jobs keep the process's own sessionmaker: tests route requests
        # through one connection (`Resources.use_sessionmaker`) that they must not share.
        self.sessionmaker = context.sessionmaker
        self.finisher = finisher
        self.running = running
        settings = context.settings
        self.lease_seconds = settings.turn_lease_seconds
        self.renew_seconds = settings.turn_lease_renew_seconds
        self.sweep_seconds = settings.turn_sweep_seconds
        self._timers = (
            Periodic("turn lease renewal", self.renew_seconds, self.renew, at_start=False),
            Periodic("orphaned turn sweep", self.sweep_seconds, self.sweep, at_start=True),
        )

    def start(self) -> None:
        """Start the renewal and sweep timers."""
        for timer in self._timers:
            timer.start()

    async def stop(self) -> None:
        """Stop the timers (at shutdown)."""
        for timer in self._timers:
            await timer.stop()

    async def renew(self) -> None:
        """Extend the leases of this process's running turns."""
        by_tenant: dict[uuid.UUID, list[uuid.UUID]] = defaultdict(list)
        for tenant_id, turn_id in self.running():
            by_tenant[tenant_id].append(turn_id)
        for tenant_id, turn_ids in by_tenant.items():
            try:  # one tenant's failure must not leave the others' leases to lapse
                async with self.sessionmaker() as db:
                    db.info[TENANT] = tenant_id
                    async with db.begin():
                        await TurnLeaseRepository(db, tenant_id).renew_leases(
                            turn_ids, self.lease_seconds
                        )
            except Exception:
                logger.warning("could not renew turn leases", exc_info=True)
        # After the leases, which other processes read: Redis trouble must not delay them.
        await self.claims.renew_held({turn for turns in by_tenant.values() for turn in turns})

    async def sweep(self) -> int:
        """Finish the orphaned turns of every tenant (a bounded batch); how many."""
        async with self.sessionmaker() as db, db.begin():
            expired = await expired_leases(db, SWEEP_BATCH)
        mine = {turn_id for _, turn_id in self.running()}
        finished = 0
        for tenant_id, turn_id in expired:
            if turn_id in mine:  # a renewal failed (database outage): the turn runs here
                continue
            try:
                done = await self.finisher.finish(
                    tenant_id, turn_id, reason="run_lost", sessionmaker=self.sessionmaker
                )
                finished += done is not None
            except Exception:
                logger.warning("could not finish an orphaned turn", exc_info=True)
        return finished

    async def lease(self, tenant_id: uuid.UUID, turn_id: uuid.UUID) -> Lease | None:
        """The turn's lease as stored, or None for an unknown turn."""
        async with self.context.transaction(tenant_id) as db:
            return await TurnLeaseRepository(db, tenant_id).lease(turn_id)

    async def settle(self, tenant_id: uuid.UUID, turn_id: uuid.UUID) -> bool:
        """For a client waiting on the turn's stream: if its producer is gone, make sure the
        stream has its terminal event (finishing the orphan, or ending the buffer of a turn
        that was stored but never got its last event written). True when nothing more will
        come from a producer."""
        if turn_id in {turn for _, turn in self.running()}:
            return False
        if await self.finisher.finish(tenant_id, turn_id, reason="run_lost") is not None:
            return True
        lease = await self.lease(tenant_id, turn_id)
        if lease is None:
            return True
        if lease.status == "pending" or not lease.expired:
            return False  # running elsewhere (or just finished: its last events are on the way)
        await self.finisher.end_stream(
            turn_id,
            {
                "turn_id": str(turn_id),
                "session_id": str(lease.session_id),
                "status": lease.status,
                "answer": lease.answer,
                "reason": "run_lost",
            },
        )
        return True
