"""Narrow a database session to what its caller may see (both the application's filter and
the row-level-security policy read the setting this writes)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from app.access.repository import (
    as_strings,
    ensure_default_collection,
    is_active_collection,
    narrow_to_visible,
    record_change,
    replace_session_scope,
    session_scope,
)
from app.core.db import visible_collections
from app.core.errors import NotFound


async def restrict_to_user(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    user_id: uuid.UUID,
    *,
    is_admin: bool | None = None,
    session_id: uuid.UUID | None = None,
) -> list[uuid.UUID]:
    """Read the collections the user may see now and narrow `db` to them; returns them."""
    visible = await narrow_to_visible(
        db, tenant_id, user_id, is_admin=is_admin, session_id=session_id
    )
    if not visible:  # a tenant without its default collection yet gets it (ADR 0078)
        await ensure_default_collection(db, tenant_id)
        visible = await narrow_to_visible(
            db, tenant_id, user_id, is_admin=is_admin, session_id=session_id
        )
    return visible


async def check_collection(
    db: AsyncSession, tenant_id: uuid.UUID, collection_id: uuid.UUID
) -> None:
    """404 `collection_not_found` unless the caller may see this collection and it is active:
    one of the collections `db` is narrowed to (a request's; another tenant's, a deleted or
    a deleting one is never among them), or, when `db` is not narrowed (the CLI), an active
    collection of the tenant. An invisible collection is not named."""
    narrowed = visible_collections(db)
    if narrowed is not None:
        visible = collection_id in narrowed
    else:
        visible = await is_active_collection(db, tenant_id, collection_id)
    if not visible:
        raise NotFound("No such collection.", code="collection_not_found")


async def set_session_scope(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    user_id: uuid.UUID,
    session_id: uuid.UUID,
    collection_ids: Sequence[uuid.UUID],
) -> list[uuid.UUID]:
    """Restrict one of the caller's conversations to collections they may see (404
    `collection_not_found` for any other: an invisible collection is not named), audited.
    `db` is the request's, already narrowed to the caller's collections."""
    wanted = list(dict.fromkeys(collection_ids))
    allowed = set(visible_collections(db) or [])
    if any(c not in allowed for c in wanted):
        raise NotFound("No such collection.", code="collection_not_found")
    before = await session_scope(db, tenant_id, session_id)
    if sorted(before) != sorted(wanted):
        await replace_session_scope(db, tenant_id, session_id, wanted)
        await record_change(
            db,
            tenant_id,
            user_id,
            "session.scope",
            f"session:{session_id}",
            as_strings(sorted(before)),
            as_strings(sorted(wanted)),
        )
    return sorted(wanted)
