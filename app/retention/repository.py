"""SQL of the retention sweep for one tenant: old turns, the summaries built from them, and
expired refresh-token logins."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import CursorResult, delete, or_, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import ChatSession, RefreshTokenFamily

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


class RetentionRepository:
    """The statements of one tenant's retention sweep."""

    def __init__(self, db: AsyncSession, tenant_id: uuid.UUID) -> None:
        self.db = db
        self.tenant_id = tenant_id

    async def delete_turns_before(self, cutoff: datetime) -> list[tuple[uuid.UUID, int]]:
        """Delete the turns created before `cutoff`: how many each session lost."""
        rows = await self.db.execute(_PURGE_TURNS, {"tenant": self.tenant_id, "cutoff": cutoff})
        return [(row.session_id, int(row.turns)) for row in rows.all()]

    async def reset_summaries(self, session_ids: Sequence[uuid.UUID]) -> int:
        """Drop the running summary of these sessions (those that have one, or a fold under
        way: its claim goes too, so the fold of purged turns is not stored); how many."""
        result = await self.db.execute(
            update(ChatSession)
            .where(
                ChatSession.tenant_id == self.tenant_id,
                ChatSession.id.in_(session_ids),
                or_(
                    ChatSession.summarized_turns > 0,
                    ChatSession.summary_claimed_until.is_not(None),
                ),
            )
            .values(summary=None, summarized_turns=0, summary_claimed_until=None)
        )
        return int(cast(CursorResult[Any], result).rowcount)

    async def delete_expired_refresh_tokens(self, now: datetime) -> int:
        """Delete refresh-token logins past their expiry; how many."""
        result = await self.db.execute(
            delete(RefreshTokenFamily).where(
                RefreshTokenFamily.tenant_id == self.tenant_id, RefreshTokenFamily.expires_at < now
            )
        )
        return int(cast(CursorResult[Any], result).rowcount)
