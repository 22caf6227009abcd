"""SQL of the retention sweep for one tenant: expired refresh-token logins here; old turns and
the summaries built from them through the conversation's stores."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import CursorResult, delete
from sqlalchemy.ext.asyncio import AsyncSession

from app.conversation.repository import TurnRepository
from app.conversation.repository.sessions import SessionRepository
from app.models import RefreshTokenFamily


class RetentionRepository:
    """The statements of one tenant's retention sweep."""

    def __init__(self, db: AsyncSession, tenant_id: uuid.UUID) -> None:
        self.db = db
        self.tenant_id = tenant_id

    async def delete_turns_before(self, cutoff: datetime) -> list[tuple[uuid.UUID, int]]:
        """Delete the turns created before `cutoff`: how many each session lost."""
        return await TurnRepository(self.db, self.tenant_id).delete_created_before(cutoff)

    async def reset_summaries(self, session_ids: Sequence[uuid.UUID]) -> int:
        """Drop the running summary of these sessions (those that have one, or a fold under
        way: its claim goes too, so the fold of purged turns is not stored); how many."""
        return await SessionRepository(self.db, self.tenant_id).reset_summaries(session_ids)

    async def delete_expired_refresh_tokens(self, now: datetime) -> int:
        """Delete refresh-token logins past their expiry; how many."""
        result = await self.db.execute(
            delete(RefreshTokenFamily).where(
                RefreshTokenFamily.tenant_id == self.tenant_id, RefreshTokenFamily.expires_at < now
            )
        )
        return int(cast(CursorResult[Any], result).rowcount)
