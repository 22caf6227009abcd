"""Idempotency keys, rate limits and token quotas, metrics, and chat without Redis."""

from __future__ import annotations

import asyncio
import time
import uuid

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.core.db import scope_to_tenant
from app.main import create_app
from app.models import Tenant
from tests.chat_helpers import stream_chat, use_model
from tests.factories import login, make_chatter, make_session, make_user
from tests.fakes import ScriptedChatModel

pytestmark = pytest.mark.committed

ANSWER = " ".join(f"word{i}" for i in range(20))


@pytest.fixture(autouse=True)
def limiter_now(monkeypatch: pytest.MonkeyPatch) -> float:
    """The limiter's clock, held in the middle of the current minute: the per-minute windows
    are fixed, and a test crossing a minute boundary would see its counts start again."""
    now = (time.time() // 60) * 60 + 30
    monkeypatch.setattr("app.limits.limiter.time", _Clock(now))
    return now


class _Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now


async def _set_limits(db: AsyncSession, tenant_id: uuid.UUID, **limits: int) -> None:
    await scope_to_tenant(db, tenant_id)
    await db.execute(
        update(Tenant).where(Tenant.id == tenant_id).values(settings={"limits": limits})
    )
    await db.commit()


async def test_ten_concurrent_retries_with_one_key_call_the_model_once(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    _tenant, _user, chat, owner = await make_chatter(client, db)
    model = ScriptedChatModel(reply=lambda _: ANSWER, token_delay=0.01)
    use_model(app, model)
    body = {"session_id": str(chat.id), "message": "only once, please"}
    headers = {**owner.headers, "Idempotency-Key": "retry-me"}

    responses = await asyncio.gather(
        *(client.post("/chat", json=body, headers=headers) for _ in range(10))
    )
    assert [r.status_code for r in responses] == [200] * 10, responses[0].text
    answers = {(r.json()["turn_id"], r.json()["answer"]) for r in responses}
    assert len(answers) == 1
    assert len(model.answer_prompts()) == 1

    later = await client.post("/chat", json=body, headers=headers)
    assert later.json()["turn_id"] == responses[0].json()["turn_id"]
    assert len(model.answer_prompts()) == 1

    other_body = await client.post(
        "/chat", json={**body, "message": "something else"}, headers=headers
    )
    assert other_body.status_code == 422
    assert other_body.json()["error"]["code"] == "idempotency_key_reused"

    redis = app.state.resources.redis
    key = app.state.resources.guards.idempotency.key(chat.tenant_id, chat.user_id, "retry-me")
    ttl = await redis.client.ttl(key)
    assert 24 * 3600 - 60 < ttl <= 24 * 3600


async def test_a_retried_stream_joins_the_running_one(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    _tenant, _user, chat, owner = await make_chatter(client, db)
    model = ScriptedChatModel(reply=lambda _: ANSWER, token_delay=0.02)
    use_model(app, model)
    body = {"session_id": str(chat.id), "message": "stream once"}
    headers = {**owner.headers, "Idempotency-Key": "stream-key"}

    first, second = await asyncio.gather(
        stream_chat(client, headers, body), stream_chat(client, headers, body)
    )
    assert first[0].status_code == second[0].status_code == 200
    assert [(e.id, e.name, e.data) for e in first[1]] == [(e.id, e.name, e.data) for e in second[1]]
    assert first[1][-1].name == "done"
    assert len(model.answer_prompts()) == 1


async def test_a_burst_over_the_rate_limit_gets_429_with_retry_after(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant, _user, chat, owner = await make_chatter(client, db)
    await _set_limits(db, tenant.id, user_per_min=3)
    body = {"session_id": str(chat.id), "message": "How are refunds handled?"}
    responses = [await client.post("/chat", json=body, headers=owner.headers) for _ in range(5)]
    assert [r.status_code for r in responses] == [200, 200, 200, 429, 429]
    refused = responses[-1]
    assert refused.json()["error"]["code"] == "rate_limited"
    assert 1 <= int(refused.headers["retry-after"]) <= 61
    metrics = (await client.get("/metrics")).text
    assert 'threadline_limit_rejections_total{kind="requests",scope="user"}' in metrics


async def _colleague(
    client: httpx.AsyncClient, db: AsyncSession, tenant: Tenant
) -> tuple[dict[str, str], dict[str, str]]:
    """Another user of `tenant`: their headers and a chat body for their session."""
    user = await make_user(db, tenant)
    chat = await make_session(db, user)
    logged_in = await login(client, user)
    return logged_in.headers, {"session_id": str(chat.id), "message": "How are refunds handled?"}


async def test_a_user_over_their_limit_does_not_use_up_the_tenant_budget(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant, _user, chat, owner = await make_chatter(client, db)
    use_model(app, ScriptedChatModel(reply=lambda _: "fine"))
    await _set_limits(db, tenant.id, user_per_min=2, tenant_per_min=4)
    body = {"session_id": str(chat.id), "message": "How are refunds handled?"}
    mine = [await client.post("/chat", json=body, headers=owner.headers) for _ in range(6)]
    assert [r.status_code for r in mine] == [200, 200, 429, 429, 429, 429]
    assert {r.json()["error"]["code"] for r in mine[2:]} == {"rate_limited"}

    headers, colleague_body = await _colleague(client, db, tenant)
    theirs = [await client.post("/chat", json=colleague_body, headers=headers) for _ in range(2)]
    assert [r.status_code for r in theirs] == [200, 200]  # 2 + 2 admitted: the tenant's 4


async def test_the_tenant_per_minute_limit_refuses_every_user_and_counts_only_admitted(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, limiter_now: float
) -> None:
    tenant, user, chat, owner = await make_chatter(client, db)
    use_model(app, ScriptedChatModel(reply=lambda _: "fine"))
    await _set_limits(db, tenant.id, tenant_per_min=3)
    body = {"session_id": str(chat.id), "message": "How are refunds handled?"}
    headers, colleague_body = await _colleague(client, db, tenant)
    statuses = []
    for _ in range(3):
        statuses.append((await client.post("/chat", json=body, headers=owner.headers)).status_code)
        statuses.append(
            (await client.post("/chat", json=colleague_body, headers=headers)).status_code
        )
    assert statuses == [200, 200, 200, 429, 429, 429]
    refused = await client.post("/chat", json=body, headers=owner.headers)
    assert refused.json()["error"]["code"] == "rate_limited"
    assert "tenant" in refused.json()["error"]["message"]
    redis, limiter = app.state.resources.redis, app.state.resources.guards.limiter
    minute_key = limiter._keys(tenant.id, user.id, limiter_now)["tenant_min"]
    assert int(await redis.client.get(minute_key)) == 3  # the refused ones were not counted
    metrics = (await client.get("/metrics")).text
    assert 'threadline_limit_rejections_total{kind="requests",scope="tenant"}' in metrics


async def test_a_used_up_user_quota_refuses_that_user_only(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, limiter_now: float
) -> None:
    tenant, user, chat, owner = await make_chatter(client, db)
    model = ScriptedChatModel(reply=lambda _: ANSWER)
    use_model(app, model)
    await _set_limits(db, tenant.id, user_tokens_per_day=10_000)
    body = {"session_id": str(chat.id), "message": "How are refunds handled?"}
    first = await client.post("/chat", json=body, headers=owner.headers)
    assert first.status_code == 200
    redis, limiter = app.state.resources.redis, app.state.resources.guards.limiter
    day_key = limiter._keys(tenant.id, user.id, limiter_now)["user_day"]
    assert int(await redis.client.get(day_key)) == first.json()["usage"]["total_tokens"]
    await redis.client.incrby(day_key, 10_000)

    refused = await client.post("/chat", json=body, headers=owner.headers)
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "token_quota_exceeded"
    assert "user" in refused.json()["error"]["message"]
    headers, colleague_body = await _colleague(client, db, tenant)
    assert (await client.post("/chat", json=colleague_body, headers=headers)).status_code == 200
    assert len(model.answer_prompts()) == 2  # the refused turn never reached the model


async def test_an_exhausted_daily_token_quota_refuses_before_the_model_is_called(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, limiter_now: float
) -> None:
    tenant, user, chat, owner = await make_chatter(client, db)
    model = ScriptedChatModel(reply=lambda _: ANSWER)
    use_model(app, model)
    await _set_limits(db, tenant.id, tenant_tokens_per_day=10_000)
    body = {"session_id": str(chat.id), "message": "How are refunds handled?"}
    first = await client.post("/chat", json=body, headers=owner.headers)
    assert first.status_code == 200
    used = first.json()["usage"]["total_tokens"]
    assert used > 0
    # Mid-day, the tenant has used up its tokens (other users' turns, say).
    redis, limiter = app.state.resources.redis, app.state.resources.guards.limiter
    day_key = limiter._keys(tenant.id, user.id, limiter_now)["tenant_day"]
    assert int(await redis.client.get(day_key)) == used
    await redis.client.incrby(day_key, 10_000)

    refused = await client.post("/chat", json=body, headers=owner.headers)
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "token_quota_exceeded"
    assert int(refused.headers["retry-after"]) > 0
    streamed = await client.post("/chat/stream", json=body, headers=owner.headers)
    assert streamed.status_code == 429
    assert len(model.answer_prompts()) == 1  # refused before the model


async def test_metrics_expose_nodes_tokens_streams_and_the_cache(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    _tenant, _user, chat, owner = await make_chatter(client, db)
    body = {"session_id": str(chat.id), "message": "How are refunds handled?"}
    await stream_chat(client, owner.headers, body)
    await client.post("/chat", json=body, headers=owner.headers)
    response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    for needle in (
        'threadline_node_seconds_count{node="generate"}',
        'threadline_node_seconds_count{node="retrieve"}',
        'threadline_tokens_total{kind="completion"}',
        'threadline_streams_started_total{kind="new"}',
        "threadline_streams_active",
        'threadline_history_cache_total{result="hit"}',
        'threadline_history_cache_total{result="miss"}',
        'threadline_turn_seconds_count{status="complete"}',
    ):
        assert needle in text, needle


async def test_without_redis_chat_answers_and_readyz_says_redis_is_down(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession], db: AsyncSession
) -> None:
    down = settings.model_copy(
        update={"redis_url": "redis://127.0.0.1:1/0", "rate_limit_user_per_min": 1}
    )
    application = create_app(down)
    async with application.router.lifespan_context(application):
        application.state.resources.use_sessionmaker(sessionmaker)
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://t.test") as client:
            _tenant, _user, chat, owner = await make_chatter(client, db)
            body = {"session_id": str(chat.id), "message": "How are refunds handled?"}
            headers = {**owner.headers, "Idempotency-Key": "k"}
            answers = [await client.post("/chat", json=body, headers=headers) for _ in range(2)]
            assert [a.status_code for a in answers] == [200, 200]  # no rate limit without Redis
            response, events, _ = await stream_chat(client, owner.headers, body)
            assert response.status_code == 200
            assert events[-1].name == "done"
            resumed = await client.get(
                f"/chat/{events[0].data['turn_id']}/stream",
                headers={**owner.headers, "Last-Event-ID": "1"},
            )
            assert resumed.status_code == 503
            assert resumed.json()["error"]["code"] == "resume_unavailable"
            ready = (await client.get("/readyz")).json()
            assert ready["checks"]["redis"]["status"] == "down"
            assert ready["status"] == "degraded"


async def test_a_running_claim_expires_soon_and_is_kept_a_day_once_answered(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    _tenant, _user, chat, owner = await make_chatter(client, db)
    model = ScriptedChatModel(reply=lambda _: ANSWER, token_delay=0.03)
    use_model(app, model)
    body = {"session_id": str(chat.id), "message": "take your time"}
    headers = {**owner.headers, "Idempotency-Key": "short-while-running"}
    running = asyncio.create_task(client.post("/chat", json=body, headers=headers))
    for _ in range(500):
        if model.tokens_generated >= 2:
            break
        await asyncio.sleep(0.01)
    redis = app.state.resources.redis
    key = app.state.resources.guards.idempotency.key(
        chat.tenant_id, chat.user_id, "short-while-running"
    )
    # Soon: the longest a turn can run (model timeout, the end-of-turn write's outage retry,
    # the lease after which another process finishes an orphan) and a minute, not a day.
    settings = app.state.resources.settings
    limit = (
        settings.llm_timeout_seconds
        + settings.db_write_retry_seconds
        + settings.turn_lease_seconds
        + settings.turn_sweep_seconds
        + 60
    )
    assert limit < 3600
    assert 0 < await redis.client.ttl(key) <= limit
    assert (await running).status_code == 200
    assert 24 * 3600 - 60 < await redis.client.ttl(key) <= 24 * 3600


async def test_any_failure_before_the_run_releases_the_claim(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    _tenant, _user, chat, owner = await make_chatter(client, db)
    use_model(app, ScriptedChatModel(reply=lambda _: "fine"))
    body = {"session_id": str(chat.id), "message": "again"}
    headers = {**owner.headers, "Idempotency-Key": "fails-once"}

    async def broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError("the database went away mid-request")

    monkeypatch.setattr("app.conversation.service.admission.prepare_turn", broken)
    failed = await client.post("/chat", json=body, headers=headers)
    assert failed.status_code == 500
    monkeypatch.undo()

    retry = await client.post("/chat", json=body, headers=headers)
    assert retry.status_code == 200, retry.text
    assert retry.json()["answer"]
