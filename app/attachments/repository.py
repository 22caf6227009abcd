"""SQL for a user's attachments and their links to chat sessions."""

from __future__ import annotations

import uuid
from typing import Any, cast

from sqlalchemy import CursorResult, delete, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.downloads import StoredFile
from app.core.repository import TenantRepository
from app.ingestion.uploads import NewDocumentColumns
from app.models import Attachment, SessionAttachment


class AttachmentRepository(TenantRepository[Attachment]):
    """One user's attachments (another user's are invisible here)."""

    model = Attachment

    def __init__(self, db: AsyncSession, tenant_id: uuid.UUID, user_id: uuid.UUID) -> None:
        super().__init__(db, tenant_id)
        self.user_id = user_id

    async def owned(self, attachment_id: uuid.UUID) -> Attachment | None:
        """The user's attachment with this id."""
        return await self.db.scalar(
            self.scoped().where(Attachment.user_id == self.user_id, Attachment.id == attachment_id)
        )

    async def original(self, attachment_id: uuid.UUID) -> StoredFile | None:
        """The user's attachment's stored file, name and type (None: not theirs)."""
        row = (
            await self.db.execute(
                select(Attachment.source, Attachment.filename, Attachment.content_type).where(
                    Attachment.tenant_id == self.tenant_id,
                    Attachment.user_id == self.user_id,
                    Attachment.id == attachment_id,
                )
            )
        ).one_or_none()
        if row is None or row.source is None:
            return None
        return StoredFile(row.source, row.filename or "attachment", row.content_type)

    async def insert_new(self, columns: NewDocumentColumns) -> Attachment | None:
        """Insert an attachment; None when the user already has one with this content hash
        (INSERT ... ON CONFLICT: concurrent identical uploads store one row)."""
        inserted = await self.db.scalars(
            pg_insert(Attachment)
            .values(tenant_id=self.tenant_id, id=uuid.uuid4(), user_id=self.user_id, **columns)
            .on_conflict_do_nothing(index_elements=["tenant_id", "user_id", "content_hash"])
            .returning(Attachment)
        )
        return inserted.one_or_none()

    async def by_content_hash(self, content_hash: str) -> Attachment | None:
        """The user's attachment with this content."""
        return await self.db.scalar(
            self.scoped().where(
                Attachment.user_id == self.user_id, Attachment.content_hash == content_hash
            )
        )

    async def in_session(self, session_id: uuid.UUID) -> list[Attachment]:
        """The attachments active in a chat session, in the order they were added."""
        rows = await self.db.scalars(
            select(Attachment)
            .join(
                SessionAttachment,
                (SessionAttachment.tenant_id == Attachment.tenant_id)
                & (SessionAttachment.attachment_id == Attachment.id),
            )
            .where(
                SessionAttachment.tenant_id == self.tenant_id,
                SessionAttachment.session_id == session_id,
            )
            .order_by(SessionAttachment.created_at)
        )
        return list(rows)

    async def link(self, session_id: uuid.UUID, attachment_id: uuid.UUID) -> None:
        """Make the attachment active in the chat session (nothing if it already is)."""
        await self.db.execute(
            pg_insert(SessionAttachment)
            .values(tenant_id=self.tenant_id, session_id=session_id, attachment_id=attachment_id)
            .on_conflict_do_nothing()
        )

    async def unlink(self, session_id: uuid.UUID, attachment_id: uuid.UUID) -> bool:
        """Take the attachment out of the chat session; False if it was not in it."""
        result = await self.db.execute(
            delete(SessionAttachment).where(
                SessionAttachment.tenant_id == self.tenant_id,
                SessionAttachment.session_id == session_id,
                SessionAttachment.attachment_id == attachment_id,
            )
        )
        return bool(cast(CursorResult[Any], result).rowcount)

    async def refresh(self, attachment: Attachment) -> None:
        """Reload the row's server-set columns."""
        await self.db.refresh(attachment)
