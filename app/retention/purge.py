"""The retention sweep: per tenant, in the tenant's own scope and transaction.

- turns older than the tenant's `max_turn_age_days` (when set), and the checkpoints taken
  before that age (they hold the same queries and answers);
- a session that lost turns its running summary covered loses the summary too (it was made
  from them); the next turn rebuilds one from the turns that remain (docs/adr/0009);
- refresh-token logins past their expiry, for every tenant;
- checkpoint rows whose session no longer exists (a write that raced the session's delete).

Sessions themselves stay: the user deletes conversations; retention ages their content out.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.conversation.checkpoints.repository import purge_before, sweep_orphans
from app.conversation.history import HistoryStore
from app.core.db import scope_to_tenant
from app.retention.policy import max_turn_age_days
from app.retention.repository import RetentionRepository
from app.tenants.repository import every_tenant_settings

logger = logging.getLogger(__name__)


@dataclass
class Purged:
    """What one sweep removed (and which sessions lost turns)."""

    turns: int = 0
    summaries_reset: int = 0
    checkpoints: int = 0
    orphan_checkpoints: int = 0
    refresh_tokens: int = 0
    sessions: list[uuid.UUID] = field(default_factory=list, repr=False)

    def add(self, other: Purged) -> None:
        """Add another sweep's counts to these."""
        self.turns += other.turns
        self.summaries_reset += other.summaries_reset
        self.checkpoints += other.checkpoints
        self.orphan_checkpoints += other.orphan_checkpoints
        self.refresh_tokens += other.refresh_tokens


async def purge_tenant(
    db: AsyncSession, tenant_id: uuid.UUID, max_age_days: int | None, now: datetime
) -> Purged:
    """Everything the sweep removes for one tenant, in `db`'s (tenant-scoped) transaction."""
    rows = RetentionRepository(db, tenant_id)
    purged = Purged()
    if max_age_days is not None:
        cutoff = now - timedelta(days=max_age_days)
        lost = await rows.delete_turns_before(cutoff)
        purged.sessions = [session_id for session_id, _ in lost]
        purged.turns = sum(turns for _, turns in lost)
        if purged.sessions:
            purged.summaries_reset = await rows.reset_summaries(purged.sessions)
        purged.checkpoints = await purge_before(db, cutoff)
    purged.refresh_tokens = await rows.delete_expired_refresh_tokens(now)
    purged.orphan_checkpoints = await sweep_orphans(db)
    return purged


async def _tenants(sessionmaker: async_sessionmaker[AsyncSession]) -> list[tuple[uuid.UUID, Any]]:
    async with sessionmaker() as db, db.begin():
        return await every_tenant_settings(db)


async def sweep(
    sessionmaker: async_sessionmaker[AsyncSession],
    history: HistoryStore | None,
    now: datetime,
) -> Purged:
    """Run the retention sweep over every tenant; one transaction per tenant."""
    total = Purged()
    for tenant_id, settings in await _tenants(sessionmaker):
        async with sessionmaker() as db:
            await scope_to_tenant(db, tenant_id)
            async with db.begin():
                purged = await purge_tenant(db, tenant_id, max_turn_age_days(settings), now)
        if history is not None:
            for session_id in purged.sessions:  # cached snapshots may hold purged turns
                await history.drop(tenant_id, session_id)
        total.add(purged)
    logger.info(
        "retention sweep",
        extra={
            "turns": total.turns,
            "checkpoints": total.checkpoints,
            "orphan_checkpoints": total.orphan_checkpoints,
            "refresh_tokens": total.refresh_tokens,
        },
    )
    return total
