"""Checkpoint rows carry their tenant (migration 0011): orphans stay reachable by their own
tenant only, and no tenant can tag a row as another's."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession

from app.conversation.checkpoints.repository import sweep_orphans
from app.core.db import scope_to_tenant
from tests.factories import make_session, make_tenant, make_user

_INSERT = text(
    "INSERT INTO checkpoints (thread_id, checkpoint_id, checkpoint) VALUES (:t, :c, '{}')"
)
_COUNT = text("SELECT count(*) FROM checkpoints WHERE thread_id = :t")


async def test_orphans_are_seen_and_swept_by_their_own_tenant_only(db: AsyncSession) -> None:
    tenant_a, tenant_b = await make_tenant(db), await make_tenant(db)
    chat_a = await make_session(db, await make_user(db, tenant_a))
    chat_b = await make_session(db, await make_user(db, tenant_b))
    for tenant, chat in ((tenant_a, chat_a), (tenant_b, chat_b)):
        await scope_to_tenant(db, tenant.id)
        await db.execute(_INSERT, {"t": str(chat.id), "c": "c1"})
        await db.execute(text("DELETE FROM chat_sessions"))  # the thread is now an orphan
    await scope_to_tenant(db, tenant_a.id)
    assert await db.scalar(_COUNT, {"t": str(chat_a.id)}) == 1  # tagged: still reachable
    assert await db.scalar(_COUNT, {"t": str(chat_b.id)}) == 0  # another tenant's: never

    assert await sweep_orphans(db) == 1

    assert await db.scalar(_COUNT, {"t": str(chat_a.id)}) == 0
    await scope_to_tenant(db, tenant_b.id)
    assert await db.scalar(_COUNT, {"t": str(chat_b.id)}) == 1


async def test_a_checkpoint_cannot_be_tagged_with_another_tenant(db: AsyncSession) -> None:
    tenant_a, tenant_b = await make_tenant(db), await make_tenant(db)
    chat_a = await make_session(db, await make_user(db, tenant_a))
    await scope_to_tenant(db, tenant_a.id)
    with pytest.raises(DBAPIError, match="row-level security"):
        async with db.begin_nested():
            await db.execute(
                text(
                    "INSERT INTO checkpoints (thread_id, checkpoint_id, checkpoint, tenant_id) "
                    "VALUES (:t, 'c1', '{}', :other)"
                ),
                {"t": str(chat_a.id), "other": tenant_b.id},
            )
