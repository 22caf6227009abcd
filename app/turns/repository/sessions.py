"""SQL for what a turn reads and links on its chat session: the running summary and the
session's attachments (ownership, links, processing status)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import Row, select
from sqlalchemy.dialects.postgresql import insert as pg_insert

from app.core.repository import TenantRepository
from app.models import Attachment, ChatSession, SessionAttachment


class SessionStateRepository(TenantRepository[ChatSession]):
    """A chat session's running summary and active attachments, as a turn reads them."""

    model = ChatSession

    async def summary(self, session_id: uuid.UUID) -> tuple[str, int]:
        """The session's running summary and how many turns it covers."""
        row = (
            await self.db.execute(
                select(ChatSession.summary, ChatSession.summarized_turns).where(
                    ChatSession.tenant_id == self.tenant_id, ChatSession.id == session_id
                )
            )
        ).one_or_none()
        if row is None:
            return "", 0
        return row.summary or "", int(row.summarized_turns)

    async def active_attachment_ids(self, session_id: uuid.UUID) -> list[uuid.UUID]:
        """The attachments active in the session, oldest first."""
        rows = await self.db.execute(
            select(SessionAttachment.attachment_id)
            .where(
                SessionAttachment.tenant_id == self.tenant_id,
                SessionAttachment.session_id == session_id,
            )
            .order_by(SessionAttachment.created_at)
        )
        return list(rows.scalars())

    async def owned_attachments(
        self, user_id: uuid.UUID, attachment_ids: Sequence[uuid.UUID]
    ) -> set[uuid.UUID]:
        """Which of `attachment_ids` are this user's (unknown and foreign ones are left out)."""
        if not attachment_ids:
            return set()
        rows = await self.db.scalars(
            select(Attachment.id).where(
                Attachment.tenant_id == self.tenant_id,
                Attachment.user_id == user_id,
                Attachment.id.in_(attachment_ids),
            )
        )
        return set(rows)

    async def link_attachments(
        self, session_id: uuid.UUID, attachment_ids: Sequence[uuid.UUID]
    ) -> None:
        """Make the attachments active in the session (linking one twice is a no-op)."""
        links = [
            {"tenant_id": self.tenant_id, "session_id": session_id, "attachment_id": a}
            for a in attachment_ids
        ]
        await self.db.execute(pg_insert(SessionAttachment).values(links).on_conflict_do_nothing())

    async def attachment_statuses(
        self, attachment_ids: Sequence[uuid.UUID]
    ) -> Sequence[Row[uuid.UUID, str, str | None]]:
        """Each attachment's id, processing status and error."""
        statement = select(Attachment.id, Attachment.status, Attachment.error).where(
            Attachment.tenant_id == self.tenant_id, Attachment.id.in_(attachment_ids)
        )
        return (await self.db.execute(statement)).all()
