"""Token quotas under concurrency: a turn reserves its expected tokens at admission, atomically
with the check, and the reservation is replaced by what it used when it ends, whether it
completed, failed or was never run (docs/adr/0049)."""

from __future__ import annotations

import asyncio
import time
import uuid

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.core.db import scope_to_tenant
from app.models import Tenant
from tests.chat_helpers import use_model
from tests.factories import make_chatter, make_session
from tests.fakes import ScriptedChatModel

pytestmark = pytest.mark.committed

RESERVATION = 5_000
ANSWER = " ".join(f"word{i}" for i in range(20))


@pytest.fixture
async def settings(test_database: Settings) -> Settings:
    return test_database.model_copy(
        update={
            "redis_prefix": f"tl-test-{uuid.uuid4().hex[:8]}:",
            "token_reservation_per_turn": RESERVATION,
        }
    )


async def _set_limits(db: AsyncSession, tenant_id: uuid.UUID, **limits: int) -> None:
    await scope_to_tenant(db, tenant_id)
    await db.execute(
        update(Tenant).where(Tenant.id == tenant_id).values(settings={"limits": limits})
    )
    await db.commit()


async def _user_day(app: FastAPI, tenant_id: uuid.UUID, user_id: uuid.UUID) -> int:
    limiter = app.state.resources.guards.limiter
    key = limiter._keys(tenant_id, user_id, time.time())["user_day"]
    return int(await app.state.resources.redis.client.get(key) or 0)


async def test_concurrent_turns_against_a_small_quota_admit_only_as_many_as_fit(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant, user, _chat, owner = await make_chatter(client, db)
    await _set_limits(db, tenant.id, user_tokens_per_day=12_000)
    use_model(app, ScriptedChatModel(reply=lambda _: ANSWER, token_delay=0.05))
    sessions = [await make_session(db, user) for _ in range(10)]

    responses = await asyncio.gather(
        *(
            client.post(
                "/chat",
                json={"session_id": str(s.id), "message": "How are refunds handled?"},
                headers=owner.headers,
            )
            for s in sessions
        )
    )

    # Admitted while the day's count (used + reserved) is below the quota: 0, 5000, 10000.
    admitted = [r for r in responses if r.status_code == 200]
    refused = [r for r in responses if r.status_code == 429]
    assert len(admitted) == 3, [r.status_code for r in responses]
    assert len(refused) == 7
    assert {r.json()["error"]["code"] for r in refused} == {"token_quota_exceeded"}
    # Each settled to what it used: the reservations are gone from the count.
    used = sum(r.json()["usage"]["total_tokens"] for r in admitted)
    assert 0 < used < RESERVATION
    assert await _user_day(app, tenant.id, user.id) == used


async def test_a_failed_turn_and_a_turn_never_run_give_their_reservation_back(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant, user, chat, owner = await make_chatter(client, db)
    await _set_limits(db, tenant.id, user_tokens_per_day=1_000_000)

    # Reserved, then refused by the admission itself (no such session): nothing stays.
    missing = await client.post(
        "/chat",
        json={"session_id": str(uuid.uuid4()), "message": "Anyone there?"},
        headers=owner.headers,
    )
    assert missing.status_code == 404
    assert await _user_day(app, tenant.id, user.id) == 0

    # The provider fails mid-answer: what the turn spent stays counted, not the reservation.
    use_model(app, ScriptedChatModel(reply=lambda _: ANSWER, fail_after_tokens=3))
    failed = await client.post(
        "/chat",
        json={"session_id": str(chat.id), "message": "How are refunds handled?"},
        headers=owner.headers,
    )
    assert failed.status_code >= 500
    assert 0 < await _user_day(app, tenant.id, user.id) < RESERVATION
