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
from typing import Any, cast

from sqlalchemy import CursorResult, delete, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.chat.history import HistoryStore
from app.core.db import scope_to_tenant
from app.models import ChatSession, RefreshTokenFamily, Tenant
from app.privacy.repository.checkpoints import purge_before, sweep_orphans
from app.retention.policy import max_turn_age_days

logger = logging.getLogger(__name__)

_PURGE_TURNS = text(
    """
WITH gone AS (
    DELETE FROM query_history
    WHERE tenant_id = :tenant AND created_at < :cutoff
    RETURNING session_id
)
SELECT session_id, count(*) AS turns FROM gone GROUP BY session_id
"""
)


@dataclass
class Purged:
    turns: int = 0
    summaries_reset: int = 0
    checkpoints: int = 0
    orphan_checkpoints: int = 0
    refresh_tokens: int = 0
    sessions: list[uuid.UUID] = field(default_factory=list, repr=False)

    def add(self, other: Purged) -> None:
        self.turns += other.turns
        self.summaries_reset += other.summaries_reset
        self.checkpoints += other.checkpoints
        self.orphan_checkpoints += other.orphan_checkpoints
        self.refresh_tokens += other.refresh_tokens


async def purge_tenant(
    db: AsyncSession, tenant_id: uuid.UUID, max_age_days: int | None, now: datetime
) -> Purged:
    """Everything the sweep removes for one tenant, in `db`'s (tenant-scoped) transaction."""
    purged = Purged()
    if max_age_days is not None:
        cutoff = now - timedelta(days=max_age_days)
        rows = (await db.execute(_PURGE_TURNS, {"tenant": tenant_id, "cutoff": cutoff})).all()
        purged.sessions = [row.session_id for row in rows]
        purged.turns = sum(row.turns for row in rows)
        if purged.sessions:
            result = await db.execute(
                update(ChatSession)
                .where(
                    ChatSession.tenant_id == tenant_id,
                    ChatSession.id.in_(purged.sessions),
                    ChatSession.summarized_turns > 0,
                )
                .values(summary=None, summarized_turns=0)
            )
            purged.summaries_reset = int(cast(CursorResult[Any], result).rowcount)
        purged.checkpoints = await purge_before(db, cutoff)
    result = await db.execute(
        delete(RefreshTokenFamily).where(
            RefreshTokenFamily.tenant_id == tenant_id, RefreshTokenFamily.expires_at < now
        )
    )
    purged.refresh_tokens = int(cast(CursorResult[Any], result).rowcount)
    purged.orphan_checkpoints = await sweep_orphans(db)
    return purged


async def _tenants(sessionmaker: async_sessionmaker[AsyncSession]) -> list[tuple[uuid.UUID, Any]]:
    async with sessionmaker() as db, db.begin():
        # The maintenance door (migration 0011) lists tenants; it is closed again at once.
        await db.execute(text("SELECT set_config('threadline.maintenance', 'on', true)"))
        rows = (await db.execute(select(Tenant.id, Tenant.settings).order_by(Tenant.id))).all()
        await db.execute(text("SELECT set_config('threadline.maintenance', '', true)"))
    return [(row.id, row.settings) for row in rows]


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
