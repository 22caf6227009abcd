"""Turns admitted without a lease (by a process of the release before migration 0018, during
a rolling deploy) are orphans too once they are old: the sweep finds them, and a stop or a
resume does not take a young one for dead."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import func, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.conversation.repository.turn_leases import TurnLeaseRepository, expired_leases
from app.models import QueryHistory
from tests.factories import make_session, make_tenant, make_turn, make_user


async def test_an_old_turn_without_a_lease_is_swept_and_a_young_one_is_left(
    db: AsyncSession,
) -> None:
    tenant = await make_tenant(db)
    chat = await make_session(db, await make_user(db, tenant))
    old = await make_turn(db, chat, answer="", status="pending")
    young = await make_turn(db, chat, answer="", status="pending")
    await db.execute(
        update(QueryHistory)
        .where(QueryHistory.id == old.id)
        .values(lease_expires_at=None, created_at=func.now() - timedelta(minutes=10))
    )
    await db.execute(
        update(QueryHistory).where(QueryHistory.id == young.id).values(lease_expires_at=None)
    )

    swept = {turn for _, turn in await expired_leases(db, 100)}

    assert old.id in swept
    assert young.id not in swept
    turns = TurnLeaseRepository(db, tenant.id)
    assert await turns.lock_orphan(young.id, force=False) is None  # its process may be alive
    assert await turns.lock_orphan(old.id, force=False) is not None
