"""Attachments belong to one user; another user's (or tenant's) are 404. Never commits."""

from __future__ import annotations

import uuid
from typing import Any, cast

from sqlalchemy import CursorResult, select
from sqlalchemy import delete as sql_delete
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.principal import Principal
from app.core.errors import Conflict, NotFound
from app.core.jobs import enqueue_after_commit
from app.ingestion.jobs import ingest_job
from app.ingestion.uploads import Upload
from app.models import Attachment, SessionAttachment
from app.sessions.service import get_owned as get_owned_session


async def get_owned(
    session: AsyncSession, principal: Principal, attachment_id: uuid.UUID
) -> Attachment:
    found = await session.scalar(
        select(Attachment).where(
            Attachment.tenant_id == principal.tenant_id,
            Attachment.user_id == principal.user_id,
            Attachment.id == attachment_id,
        )
    )
    if found is None:
        raise NotFound("No such attachment.", code="attachment_not_found")
    return found


async def upload(
    session: AsyncSession, principal: Principal, file: Upload
) -> tuple[Attachment, bool]:
    """A new attachment queued for processing, or the caller's existing one with the same
    content (`True`). One INSERT ... ON CONFLICT on the owner's content hash, as the knowledge
    base does: concurrent identical uploads store one row."""
    for _ in range(3):  # the copy that was in the way can be deleted before it is read
        attachment = (
            await session.scalars(
                pg_insert(Attachment)
                .values(
                    tenant_id=principal.tenant_id,
                    id=uuid.uuid4(),
                    user_id=principal.user_id,
                    **file.new_document_columns(),
                )
                .on_conflict_do_nothing(index_elements=["tenant_id", "user_id", "content_hash"])
                .returning(Attachment)
            )
        ).one_or_none()
        if attachment is not None:
            enqueue_after_commit(
                session, ingest_job("attachment", principal.tenant_id, attachment.id)
            )
            return attachment, False
        existing = await session.scalar(
            select(Attachment).where(
                Attachment.tenant_id == principal.tenant_id,
                Attachment.user_id == principal.user_id,
                Attachment.content_hash == file.content_hash,
            )
        )
        if existing is None:
            continue
        if existing.status == "failed":  # uploading it again means: try again
            existing.status, existing.error, existing.progress = "pending", None, 0.0
            enqueue_after_commit(
                session, ingest_job("attachment", principal.tenant_id, existing.id)
            )
        return existing, True
    raise Conflict("The same file is being added and deleted; try again.", code="busy")


async def delete(session: AsyncSession, principal: Principal, attachment_id: uuid.UUID) -> None:
    """Its chunks, embeddings and session links go with it (ON DELETE CASCADE)."""
    await session.delete(await get_owned(session, principal, attachment_id))
    await session.flush()


async def in_session(
    session: AsyncSession, principal: Principal, session_id: uuid.UUID
) -> list[Attachment]:
    await get_owned_session(session, principal, session_id)
    rows = await session.scalars(
        select(Attachment)
        .join(
            SessionAttachment,
            (SessionAttachment.tenant_id == Attachment.tenant_id)
            & (SessionAttachment.attachment_id == Attachment.id),
        )
        .where(
            SessionAttachment.tenant_id == principal.tenant_id,
            SessionAttachment.session_id == session_id,
        )
        .order_by(SessionAttachment.created_at)
    )
    return list(rows)


async def activate(
    session: AsyncSession, principal: Principal, session_id: uuid.UUID, attachment_id: uuid.UUID
) -> None:
    await get_owned_session(session, principal, session_id)
    await get_owned(session, principal, attachment_id)
    await session.execute(
        pg_insert(SessionAttachment)
        .values(tenant_id=principal.tenant_id, session_id=session_id, attachment_id=attachment_id)
        .on_conflict_do_nothing()
    )


async def deactivate(
    session: AsyncSession, principal: Principal, session_id: uuid.UUID, attachment_id: uuid.UUID
) -> None:
    await get_owned_session(session, principal, session_id)
    result = await session.execute(
        sql_delete(SessionAttachment).where(
            SessionAttachment.tenant_id == principal.tenant_id,
            SessionAttachment.session_id == session_id,
            SessionAttachment.attachment_id == attachment_id,
        )
    )
    if not cast(CursorResult[Any], result).rowcount:
        raise NotFound("The attachment is not active in this session.", code="attachment_not_found")
