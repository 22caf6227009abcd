"""Narrow a database session to what its caller may see (both the application's filter and
the row-level-security policy read the setting this writes)."""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from app.access.repository import ensure_default_collection, visible_collection_ids
from app.core.db import restrict_to_collections


async def restrict_to_user(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    user_id: uuid.UUID,
    *,
    is_admin: bool | None = None,
    session_id: uuid.UUID | None = None,
) -> list[uuid.UUID]:
    """Read the collections the user may see now and narrow `db` to them; returns them."""
    visible = await visible_collection_ids(
        db, tenant_id, user_id, is_admin=is_admin, session_id=session_id
    )
    if not visible:  # a tenant without its default collection yet gets it (ADR 0078)
        await ensure_default_collection(db, tenant_id)
        visible = await visible_collection_ids(
            db, tenant_id, user_id, is_admin=is_admin, session_id=session_id
        )
    await restrict_to_collections(db, visible)
    return visible
