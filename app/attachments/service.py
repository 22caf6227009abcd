"""Attachments belong to one user; another user's (or tenant's) are 404. Never commits."""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from app.attachments.repository import AttachmentRepository
from app.auth.principal import Principal
from app.conversation.service.sessions import get_owned as get_owned_session
from app.core.downloads import StoredFile
from app.core.errors import Conflict, NotFound
from app.core.jobs import enqueue_after_commit
from app.ingestion.jobs import ingest_job
from app.ingestion.uploads import Upload
from app.models import Attachment


def _repo(db: AsyncSession, principal: Principal) -> AttachmentRepository:
    return AttachmentRepository(db, principal.tenant_id, principal.user_id)


async def get_owned(db: AsyncSession, principal: Principal, attachment_id: uuid.UUID) -> Attachment:
    """The caller's attachment (404 for anyone else's)."""
    found = await _repo(db, principal).owned(attachment_id)
    if found is None:
        raise NotFound("No such attachment.", code="attachment_not_found")
    return found


async def upload(db: AsyncSession, principal: Principal, file: Upload) -> tuple[Attachment, bool]:
    """A new attachment queued for processing, or the caller's existing one with the same
    content (`True`). One INSERT ... ON CONFLICT on the owner's content hash, as the knowledge
    base does: concurrent identical uploads store one row."""
    attachments = _repo(db, principal)
    attachment, duplicate = await _store(db, attachments, principal, file)
    await attachments.refresh(attachment)
    return attachment, duplicate


async def _store(
    db: AsyncSession, attachments: AttachmentRepository, principal: Principal, file: Upload
) -> tuple[Attachment, bool]:
    for _ in range(3):  # the copy that was in the way can be deleted before it is read
        attachment = await attachments.insert_new(file.new_document_columns())
        if attachment is not None:
            enqueue_after_commit(db, ingest_job("attachment", principal.tenant_id, attachment.id))
            return attachment, False
        existing = await attachments.by_content_hash(file.content_hash)
        if existing is None:
            continue
        if existing.status == "failed":  # uploading it again means: try again
            existing.status, existing.error, existing.progress = "pending", None, 0.0
            enqueue_after_commit(db, ingest_job("attachment", principal.tenant_id, existing.id))
        return existing, True
    raise Conflict("The same file is being added and deleted; try again.", code="busy")


async def delete(db: AsyncSession, principal: Principal, attachment_id: uuid.UUID) -> None:
    """Its chunks, embeddings and session links go with it (ON DELETE CASCADE)."""
    await _repo(db, principal).delete(await get_owned(db, principal, attachment_id))
    await db.flush()


async def in_session(
    db: AsyncSession, principal: Principal, session_id: uuid.UUID
) -> list[Attachment]:
    """The attachments active in one of the caller's chat sessions."""
    await get_owned_session(db, principal, session_id)
    return await _repo(db, principal).in_session(session_id)


async def activate(
    db: AsyncSession, principal: Principal, session_id: uuid.UUID, attachment_id: uuid.UUID
) -> None:
    """Make one of the caller's attachments active in one of their chat sessions."""
    await get_owned_session(db, principal, session_id)
    await get_owned(db, principal, attachment_id)
    await _repo(db, principal).link(session_id, attachment_id)


async def deactivate(
    db: AsyncSession, principal: Principal, session_id: uuid.UUID, attachment_id: uuid.UUID
) -> None:
    """Take an attachment out of one of the caller's chat sessions."""
    await get_owned_session(db, principal, session_id)
    if not await _repo(db, principal).unlink(session_id, attachment_id):
        raise NotFound("The attachment is not active in this session.", code="attachment_not_found")


async def original_file(
    db: AsyncSession, principal: Principal, attachment_id: uuid.UUID
) -> StoredFile:
    """The caller's attachment's uploaded file (404 for anyone else's)."""
    stored = await _repo(db, principal).original(attachment_id)
    if stored is None:
        raise NotFound("No such attachment.", code="attachment_not_found")
    return stored
