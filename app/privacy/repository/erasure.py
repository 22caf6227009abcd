"""SQL for erasing one user of a tenant: each step of the erasure flow is one statement, here
or, for the user's sessions and turns, in the conversation's stores."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import CursorResult, Select, delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.conversation.repository import TurnRepository
from app.conversation.repository.sessions import SessionRepository
from app.models import (
    Attachment,
    AttachmentChunk,
    AuditLog,
    KbDocument,
    SessionAttachment,
    User,
)


def _rows(result: Any) -> int:
    return int(cast(CursorResult[Any], result).rowcount)


class ErasureRepository:
    """The statements of one user's erasure, all within one tenant."""

    def __init__(self, db: AsyncSession, tenant_id: uuid.UUID) -> None:
        self.db = db
        self.tenant_id = tenant_id

    async def lock_admins(self) -> list[uuid.UUID]:
        """The tenant's admins, locked until the transaction ends."""
        admins = await self.db.execute(
            select(User.id)
            .where(User.tenant_id == self.tenant_id, User.role == "admin")
            .order_by(User.id)
            .with_for_update()
        )
        return list(admins.scalars())

    async def user_exists(self, user_id: uuid.UUID) -> bool:
        """Whether the tenant has this user."""
        found = select(User.id).where(User.tenant_id == self.tenant_id, User.id == user_id)
        return (await self.db.execute(found)).scalar_one_or_none() is not None

    async def lock_user(self, user_id: uuid.UUID) -> bool:
        """Lock the user's row (a concurrent erasure waits); False when there is none."""
        found = await self.db.execute(
            select(User.id)
            .where(User.tenant_id == self.tenant_id, User.id == user_id)
            .with_for_update()
        )
        return found.scalar_one_or_none() is not None

    async def session_ids(self, user_id: uuid.UUID) -> list[uuid.UUID]:
        """The user's chat sessions."""
        return await SessionRepository(self.db, self.tenant_id).session_ids_of(user_id)

    async def pending_turn_ids(self, user_id: uuid.UUID) -> list[uuid.UUID]:
        """The user's turns still running (or whose process died)."""
        return await TurnRepository(self.db, self.tenant_id).pending_ids_of(user_id)

    async def has_pending_turn(self, user_id: uuid.UUID) -> bool:
        """Whether any turn of the user's is still pending."""
        return await TurnRepository(self.db, self.tenant_id).has_pending_of(user_id)

    async def erased_before(self, user_id: uuid.UUID) -> bool:
        """Whether the audit log says this tenant erased the user."""
        erasure = select(AuditLog.id).where(
            AuditLog.tenant_id == self.tenant_id,
            AuditLog.action == "user.erased",
            AuditLog.target_user_id == user_id,
        )
        return (await self.db.execute(erasure.limit(1))).scalar_one_or_none() is not None

    async def delete_turns(self, user_id: uuid.UUID) -> list[str]:
        """Delete the user's turns; their ids."""
        return await TurnRepository(self.db, self.tenant_id).delete_of(user_id)

    def _attachment_ids(self, user_id: uuid.UUID) -> Select[uuid.UUID]:
        return select(Attachment.id).where(
            Attachment.tenant_id == self.tenant_id, Attachment.user_id == user_id
        )

    async def delete_session_links(
        self, user_id: uuid.UUID, session_ids: Sequence[uuid.UUID]
    ) -> None:
        """Unlink attachments from the user's sessions, and the user's attachments from any."""
        await self.db.execute(
            delete(SessionAttachment).where(
                SessionAttachment.tenant_id == self.tenant_id,
                SessionAttachment.session_id.in_(session_ids)
                | SessionAttachment.attachment_id.in_(self._attachment_ids(user_id)),
            )
        )

    async def delete_attachment_chunks(self, user_id: uuid.UUID) -> int:
        """Delete the chunks (and embeddings) of the user's attachments; how many."""
        return _rows(
            await self.db.execute(
                delete(AttachmentChunk).where(
                    AttachmentChunk.tenant_id == self.tenant_id,
                    AttachmentChunk.attachment_id.in_(self._attachment_ids(user_id)),
                )
            )
        )

    async def delete_attachments(self, user_id: uuid.UUID) -> list[str]:
        """Delete the user's attachments; their ids."""
        deleted = await self.db.execute(
            delete(Attachment)
            .where(Attachment.tenant_id == self.tenant_id, Attachment.user_id == user_id)
            .returning(Attachment.id)
        )
        return [str(a) for a in deleted.scalars()]

    async def delete_sessions(self, user_id: uuid.UUID) -> int:
        """Delete the user's chat sessions; how many."""
        return await SessionRepository(self.db, self.tenant_id).delete_of(user_id)

    async def forget_document_authorship(self, user_id: uuid.UUID) -> None:
        """Knowledge-base documents the user added stay (the tenant's), without their name."""
        await self.db.execute(
            update(KbDocument)
            .where(KbDocument.tenant_id == self.tenant_id, KbDocument.created_by == user_id)
            .values(created_by=None)
        )

    async def delete_user(self, user_id: uuid.UUID) -> int:
        """Delete the user row (API keys and refresh-token families cascade); how many."""
        return _rows(
            await self.db.execute(
                delete(User).where(User.tenant_id == self.tenant_id, User.id == user_id)
            )
        )
