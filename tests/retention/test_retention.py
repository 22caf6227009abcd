"""Retention: the sweep purges exactly what is older than each tenant's limit."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.core.db import scope_to_tenant
from app.models import ChatSession, QueryHistory, RefreshTokenFamily, Tenant, User
from app.retention.policy import set_policy
from app.retention.purge import sweep
from app.retention.schedule import RetentionScheduler
from tests.chat_helpers import ask, owner_connection, wait_for_checkpoints
from tests.factories import login, make_chatter, make_session, make_tenant, make_user

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


async def _turn_at(db: AsyncSession, chat: ChatSession, when: datetime, name: str) -> None:
    await scope_to_tenant(db, chat.tenant_id)
    db.add(
        QueryHistory(
            tenant_id=chat.tenant_id,
            session_id=chat.id,
            user_id=chat.user_id,
            user_query=name,
            answer="a",
            status="complete",
            created_at=when,
        )
    )
    await db.commit()


async def _queries(db: AsyncSession, tenant: Tenant) -> list[str]:
    await scope_to_tenant(db, tenant.id)
    rows = await db.execute(select(QueryHistory.user_query).order_by(QueryHistory.created_at))
    names = list(rows.scalars())
    await db.commit()
    return names


async def _login_family(db: AsyncSession, user: User, expires: datetime) -> None:
    await scope_to_tenant(db, user.tenant_id)
    db.add(RefreshTokenFamily(tenant_id=user.tenant_id, user_id=user.id, expires_at=expires))
    await db.commit()


async def test_the_sweep_purges_exactly_the_turns_older_than_the_tenant_limit(
    db: AsyncSession, sessionmaker: async_sessionmaker[AsyncSession]
) -> None:
    limited, unlimited = await make_tenant(db), await make_tenant(db)
    await scope_to_tenant(db, limited.id)
    await set_policy(db, limited.id, 30)
    await db.commit()
    user = await make_user(db, limited)
    chat, untouched = await make_session(db, user), await make_session(db, user)
    for days, name in ((40, "old"), (30.01, "just over"), (29.99, "just under"), (1, "new")):
        await _turn_at(db, chat, NOW - timedelta(days=days), name)
    await _turn_at(db, untouched, NOW - timedelta(days=2), "recent elsewhere")
    other_chat = await make_session(db, await make_user(db, unlimited))
    await _turn_at(db, other_chat, NOW - timedelta(days=400), "kept: no limit")
    await scope_to_tenant(db, limited.id)
    summarised = await db.get(ChatSession, (limited.id, chat.id))
    assert summarised is not None
    summarised.summary, summarised.summarized_turns = "They talked about old things.", 2
    await db.commit()
    await _login_family(db, user, NOW - timedelta(seconds=1))
    await _login_family(db, user, NOW + timedelta(days=1))

    purged = await sweep(sessionmaker, None, NOW)

    assert purged.turns == 2
    assert await _queries(db, limited) == ["just under", "recent elsewhere", "new"]
    assert await _queries(db, unlimited) == ["kept: no limit"]
    await scope_to_tenant(db, limited.id)
    reset = await db.get(ChatSession, (limited.id, chat.id), populate_existing=True)
    assert reset is not None
    # The summary was made from purged turns: it goes, and is rebuilt from what remains.
    assert (reset.summary, reset.summarized_turns) == (None, 0)
    expiries = (await db.execute(select(RefreshTokenFamily.expires_at))).scalars()
    assert list(expiries) == [NOW + timedelta(days=1)]
    assert purged.refresh_tokens == 1
    await db.commit()
    again = await sweep(sessionmaker, None, NOW)
    assert (again.turns, again.refresh_tokens) == (0, 0)


async def test_retention_is_off_by_default_and_set_by_admins_only(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    admin = await login(client, await make_user(db, tenant, role="admin"))
    member = await login(client, await make_user(db, tenant))
    assert (await client.get("/admin/retention", headers=admin.headers)).json() == {
        "max_turn_age_days": None
    }
    put = await client.put(
        "/admin/retention", json={"max_turn_age_days": 90}, headers=admin.headers
    )
    assert put.status_code == 200
    assert (await client.get("/admin/retention", headers=admin.headers)).json() == {
        "max_turn_age_days": 90
    }
    for bad in ({"max_turn_age_days": 0}, {"max_turn_age_days": "x"}, {"days": 3}):
        response = await client.put("/admin/retention", json=bad, headers=admin.headers)
        assert response.status_code == 422, bad
    denied = await client.put(
        "/admin/retention", json={"max_turn_age_days": 1}, headers=member.headers
    )
    assert denied.status_code == 403
    cleared = await client.put(
        "/admin/retention", json={"max_turn_age_days": None}, headers=admin.headers
    )
    assert cleared.json() == {"max_turn_age_days": None}


async def _checkpoint_rows(settings: Settings, thread: uuid.UUID) -> int:
    total = 0
    async with owner_connection(settings) as probe:
        for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
            total += await probe.scalar(
                text(f"SELECT count(*) FROM {table} WHERE thread_id = :t"), {"t": str(thread)}
            )
    return total


@pytest.mark.committed
async def test_purged_turns_take_their_checkpoints_and_orphans_are_swept(
    app: FastAPI,
    client: httpx.AsyncClient,
    db: AsyncSession,
    settings: Settings,
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    tenant, _user, chat, owner = await make_chatter(client, db)
    kept_tenant, _other, kept_chat, other_owner = await make_chatter(client, db)
    await scope_to_tenant(db, tenant.id)
    await set_policy(db, tenant.id, 30)
    await db.commit()
    doomed = await make_session(db, _other)  # in the tenant without a limit: only orphaned
    assert (await ask(client, owner, chat, "hello")).status_code == 200
    for session in (kept_chat, doomed):
        assert (await ask(client, other_owner, session, "hello")).status_code == 200
    await wait_for_checkpoints(settings, [str(chat.id), str(doomed.id), str(kept_chat.id)])
    async with owner_connection(settings) as probe:  # tagged with their tenant on insert
        tags = await probe.execute(text("SELECT DISTINCT thread_id, tenant_id FROM checkpoints"))
        assert {(r.thread_id, r.tenant_id) for r in tags} == {
            (str(chat.id), tenant.id),
            (str(doomed.id), kept_tenant.id),
            (str(kept_chat.id), kept_tenant.id),
        }
        # A session deleted while its checkpoint was being written (simulated past RLS).
        await probe.execute(text("DELETE FROM chat_sessions WHERE id = :s"), {"s": doomed.id})
        await probe.commit()
    history = app.state.resources.history
    assert await history.redis.client.exists(history.key(tenant.id, chat.id))

    purged = await sweep(sessionmaker, history, datetime.now(UTC) + timedelta(days=31))

    assert purged.turns == 1
    assert purged.orphan_checkpoints > 0
    assert purged.checkpoints > 0
    assert await _checkpoint_rows(settings, chat.id) == 0
    assert await _checkpoint_rows(settings, doomed.id) == 0
    assert await _checkpoint_rows(settings, kept_chat.id) > 0  # no limit in that tenant
    assert not await history.redis.client.exists(history.key(tenant.id, chat.id))
    assert await _queries(db, tenant) == []
    assert await _queries(db, kept_tenant) == ["hello"]
    # Both logins had expired 31 days on. The sweep covers every tenant of the database, so
    # the count also holds the logins of other files' committed tenants (browser tests).
    assert purged.refresh_tokens >= 2
    async with owner_connection(settings) as probe:
        logins = await probe.scalar(
            text("SELECT count(*) FROM refresh_token_families WHERE user_id IN (:a, :b)"),
            {"a": _user.id, "b": _other.id},
        )
    assert logins == 0
    again = await ask(client, await login(client, _user), chat, "still here?")  # works on
    assert again.status_code == 200, again.text


@pytest.mark.committed  # the scheduler's task and the test use the database concurrently
async def test_the_in_process_scheduler_runs_the_sweep(app: FastAPI, db: AsyncSession) -> None:
    tenant = await make_tenant(db)
    await scope_to_tenant(db, tenant.id)
    await set_policy(db, tenant.id, 1)
    await db.commit()
    chat = await make_session(db, await make_user(db, tenant))
    await _turn_at(db, chat, datetime.now(UTC) - timedelta(days=2), "old")
    resources = app.state.resources
    scheduler = RetentionScheduler(
        lambda: resources.sessionmaker, resources.history, interval_seconds=0.05
    )
    scheduler.start()
    try:
        for _ in range(100):
            if await _queries(db, tenant) == []:
                break
            await asyncio.sleep(0.05)
    finally:
        await scheduler.stop()
    assert await _queries(db, tenant) == []


def test_celery_beat_schedules_the_sweep() -> None:
    from app.bootstrap import TASK_MODULES
    from app.retention.tasks import SWEEP
    from app.worker.celery_app import celery_app

    # The task runs on a worker process's loop and engine (app.worker.tasks), as ingestion does.
    assert "app.worker.tasks" in TASK_MODULES
    assert celery_app.conf.beat_schedule["retention-sweep"]["task"] == SWEEP
    celery_app.loader.import_default_modules()  # what a worker does at start: imports `include`
    assert SWEEP in celery_app.tasks
