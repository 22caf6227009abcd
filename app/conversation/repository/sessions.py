from __future__ import annotations

import uuid

from app.core.pagination import Cursor
from app.core.repository import TenantRepository
from app.models import ChatSession


class SessionRepository(TenantRepository[ChatSession]):
    """The tenant's chat sessions."""

    model = ChatSession

    async def owned(self, session_id: uuid.UUID, user_id: uuid.UUID) -> ChatSession | None:
        """The session if it belongs to this user; None for unknown and foreign alike."""
        result = await self.db.execute(
            self.scoped().where(ChatSession.id == session_id, ChatSession.user_id == user_id)
        )
        return result.scalar_one_or_none()

    async def page(
        self, user_id: uuid.UUID, *, limit: int, after: Cursor | None
    ) -> list[ChatSession]:
        """One page of the user's sessions, keyset-paginated."""
        statement = self.scoped().where(ChatSession.user_id == user_id)
        return await self.keyset_page(statement, limit=limit, after=after)
