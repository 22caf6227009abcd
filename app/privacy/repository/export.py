"""SQL of the privacy export: the user's profile and each list of the export document, read
as JSON text made by PostgreSQL in batches through a server-side cursor."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

from sqlalchemy import Select, false, literal_column, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.conversation.repository.sessions import exported_sessions, user_session_ids
from app.conversation.repository.turns import exported_turns
from app.feedback.repository import exported_feedback
from app.models import (
    ApiKey,
    Attachment,
    AuditLog,
    KbDocument,
    RefreshTokenFamily,
    SessionAttachment,
    User,
)


def sections(
    tenant_id: uuid.UUID, user_id: uuid.UUID, *, only_key: uuid.UUID | None = None
) -> list[tuple[str, Select[Any], tuple[str, ...]]]:
    """Each top-level list of the export, the query of its rows, and their order.

    `only_key`: asked for by this key with less than its account's role: of the account's
    keys only this one, and no admin actions (app/privacy/export.py)."""
    keys = (ApiKey.tenant_id == tenant_id) & (ApiKey.user_id == user_id)
    if only_key is not None:
        keys &= ApiKey.id == only_key
    actions = (AuditLog.tenant_id == tenant_id) & (AuditLog.actor_user_id == user_id)
    if only_key is not None:
        actions &= false()
    return [
        ("sessions", exported_sessions(tenant_id, user_id), ("created_at", "id")),
        ("turns", exported_turns(tenant_id, user_id), ("created_at", "id")),
        ("feedback", exported_feedback(tenant_id, user_id), ("created_at", "turn_id")),
        (
            "attachments",
            select(
                Attachment.id,
                Attachment.filename,
                Attachment.content_type,
                Attachment.size_bytes,
                Attachment.content_hash,
                Attachment.status,
                Attachment.chunk_count,
                Attachment.ingestion,
                Attachment.text,
                Attachment.created_at,
            ).where(Attachment.tenant_id == tenant_id, Attachment.user_id == user_id),
            ("created_at", "id"),
        ),
        (
            "session_attachments",
            select(
                SessionAttachment.session_id,
                SessionAttachment.attachment_id,
                SessionAttachment.created_at,
            ).where(
                SessionAttachment.tenant_id == tenant_id,
                SessionAttachment.session_id.in_(user_session_ids(tenant_id, user_id)),
            ),
            ("created_at", "session_id", "attachment_id"),
        ),
        (
            "api_keys",
            select(
                ApiKey.id,
                ApiKey.name,
                ApiKey.key_prefix,
                ApiKey.role,
                ApiKey.last_used_at,
                ApiKey.revoked_at,
                ApiKey.created_at,
            ).where(keys),
            ("created_at", "id"),
        ),
        (
            "admin_reads",  # the audit log's entries about this user
            select(
                AuditLog.id,
                AuditLog.actor_user_id,
                AuditLog.action,
                AuditLog.resource,
                AuditLog.details,
                AuditLog.created_at,
            ).where(AuditLog.tenant_id == tenant_id, AuditLog.target_user_id == user_id),
            ("id",),
        ),
        (
            "audit_actions",  # what the user did that the audit log records (as an admin)
            # Without target, resource and details: those name other people's data.
            select(AuditLog.id, AuditLog.action, AuditLog.created_at).where(actions),
            ("id",),
        ),
        (
            "logins",  # refresh-token families: one per login, never a token or a secret
            select(
                RefreshTokenFamily.id,
                RefreshTokenFamily.created_at,
                RefreshTokenFamily.expires_at,
                RefreshTokenFamily.revoked_at,
            ).where(
                RefreshTokenFamily.tenant_id == tenant_id, RefreshTokenFamily.user_id == user_id
            ),
            ("created_at", "id"),
        ),
        (
            "kb_documents_added",  # knowledge-base documents the user added (the tenant's)
            select(KbDocument.id, KbDocument.title, KbDocument.created_at).where(
                KbDocument.tenant_id == tenant_id, KbDocument.created_by == user_id
            ),
            ("created_at", "id"),
        ),
    ]


def _as_json_text(statement: Select[Any], order: tuple[str, ...], batch_rows: int) -> Select[Any]:
    """Each row as JSON text made by PostgreSQL (ISO times, string UUIDs): no per-row Python
    objects beyond one string, and no re-encoding of the JSONB columns."""
    rows = statement.subquery("r")
    return (
        select(literal_column("row_to_json(r)::text"))
        .select_from(rows)
        .order_by(*(rows.c[key] for key in order))
        .execution_options(yield_per=batch_rows)
    )


async def profile(db: AsyncSession, tenant_id: uuid.UUID, user_id: uuid.UUID) -> dict[str, Any]:
    """The user row's exported columns."""
    row = (
        await db.execute(
            select(User.id, User.email, User.role, User.tenant_id, User.created_at).where(
                User.tenant_id == tenant_id, User.id == user_id
            )
        )
    ).one()
    return dict(row._mapping)


async def json_batches(
    db: AsyncSession, statement: Select[Any], order: tuple[str, ...], batch_rows: int
) -> AsyncIterator[list[str]]:
    """The rows of `statement` in `order`, each as JSON text, `batch_rows` at a time."""
    rows = await db.stream(_as_json_text(statement, order, batch_rows))
    async for partition in rows.partitions():
        yield [row[0] for row in partition]
