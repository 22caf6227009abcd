"""An evicting Redis (a private redis-server with `maxmemory` and `allkeys-lru`) forgets an
Idempotency-Key between a request and its retry: the turn's row still knows it, so the retry
gets the first answer and no second turn runs (ADR 0069). Start-up warns of such a Redis and
`/readyz` reports it as a degradation."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from fastapi import FastAPI
from redis.asyncio import Redis
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.core.db import scope_to_tenant
from app.main import create_app
from app.models import QueryHistory
from tests.chat_helpers import stream_chat, use_model
from tests.factories import Chatter, make_chatter
from tests.fakes import ScriptedChatModel
from tests.private_redis import PrivateRedis, private_redis

pytestmark = pytest.mark.committed

KEY = "evicted-key"
# The real eviction fills at most this much, for at most this long, before giving up.
FILL_LIMIT_BYTES, FILL_LIMIT_SECONDS, FILLER_BYTES = 96 * 2**20, 30.0, 32 * 2**10


@pytest.fixture
def server() -> Iterator[PrivateRedis]:
    with private_redis(maxmemory="8mb", maxmemory_policy="allkeys-lru", appendonly="no") as up:
        yield up


@contextlib.asynccontextmanager
async def evicting_app(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession], server: PrivateRedis
) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    bound = settings.model_copy(update={"redis_url": server.url})
    application = create_app(bound)
    async with application.router.lifespan_context(application):
        application.state.resources.use_sessionmaker(sessionmaker)
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://t.test") as client:
            yield application, client


def redis_key(application: FastAPI, who: Chatter, raw: str = KEY) -> str:
    store = application.state.resources.guards.idempotency
    key: str = store.key(who.tenant.id, who.user.id, raw)
    return key


async def turns_of(db: AsyncSession, who: Chatter) -> int:
    await scope_to_tenant(db, who.tenant.id)
    rows = await db.scalar(
        select(func.count()).select_from(QueryHistory).where(QueryHistory.session_id == who.chat.id)
    )
    await db.commit()
    return int(rows or 0)


@pytest.mark.parametrize("endpoint", ["/chat", "/chat/stream"])
async def test_a_retry_whose_key_redis_forgot_gets_the_first_answer(
    settings: Settings,
    sessionmaker: async_sessionmaker[AsyncSession],
    db: AsyncSession,
    server: PrivateRedis,
    endpoint: str,
) -> None:
    async with evicting_app(settings, sessionmaker, server) as (application, client):
        who = await make_chatter(client, db)
        answers = iter(["the first answer", "a second answer"])
        model = ScriptedChatModel(reply=lambda _: next(answers))
        use_model(application, model)
        body = {"session_id": str(who.chat.id), "message": "once only"}
        headers = {**who.owner.headers, "Idempotency-Key": KEY}

        async def send() -> tuple[str, str]:
            if endpoint == "/chat":
                response = await client.post("/chat", json=body, headers=headers)
                assert response.status_code == 200, response.text
                return response.json()["turn_id"], response.json()["answer"]
            response, events, _ = await stream_chat(client, headers, body)
            assert response.status_code == 200
            done = events[-1]
            assert done.name == "done", events
            return done.data["turn_id"], done.data["answer"]

        first = await send()
        key = redis_key(application, who)
        assert server.command("DEL", key) == b":1\r\n"  # Redis forgets the key
        retry = await send()
        assert server.command("EXISTS", key) == b":1\r\n"  # recorded again from the row
        again = await send()

    assert first == retry == again
    assert first[1] == "the first answer"
    assert len(model.answer_prompts()) == 1
    assert await turns_of(db, who) == 1


async def test_a_retry_of_a_running_turn_whose_key_redis_forgot_follows_it(
    settings: Settings,
    sessionmaker: async_sessionmaker[AsyncSession],
    db: AsyncSession,
    server: PrivateRedis,
) -> None:
    async with evicting_app(settings, sessionmaker, server) as (application, client):
        who = await make_chatter(client, db)
        model = ScriptedChatModel(reply=lambda _: "slow " * 30, token_delay=0.03)
        use_model(application, model)
        body = {"session_id": str(who.chat.id), "message": "still running"}
        headers = {**who.owner.headers, "Idempotency-Key": KEY}
        first = asyncio.create_task(client.post("/chat", json=body, headers=headers))
        deadline = time.monotonic() + 10
        while model.tokens_generated == 0:  # the turn is recorded and its model is answering
            assert time.monotonic() < deadline and not first.done()
            await asyncio.sleep(0.01)
        assert server.command("DEL", redis_key(application, who)) == b":1\r\n"
        retry = await client.post("/chat", json=body, headers=headers)
        original = await first

    assert original.status_code == retry.status_code == 200, retry.text
    assert retry.json()["turn_id"] == original.json()["turn_id"]
    assert retry.json()["answer"] == original.json()["answer"]
    assert len(model.answer_prompts()) == 1
    assert await turns_of(db, who) == 1


async def test_a_retry_after_a_real_eviction_gets_the_first_answer(
    settings: Settings,
    sessionmaker: async_sessionmaker[AsyncSession],
    db: AsyncSession,
    server: PrivateRedis,
) -> None:
    async with evicting_app(settings, sessionmaker, server) as (application, client):
        who = await make_chatter(client, db)
        answers = iter(f"answer {n}" for n in range(10))
        model = ScriptedChatModel(reply=lambda _: next(answers))
        use_model(application, model)
        body = {"session_id": str(who.chat.id), "message": "once only"}
        headers = {**who.owner.headers, "Idempotency-Key": KEY}
        first = await client.post("/chat", json=body, headers=headers)
        assert first.status_code == 200

        # Other keys fill the server until LRU evicts the key (bounded in bytes and time).
        key = redis_key(application, who)
        filler = Redis.from_url(server.url)
        written, started, value = 0, time.monotonic(), b"x" * FILLER_BYTES
        try:
            while await filler.exists(key):
                assert written < FILL_LIMIT_BYTES, "the key was not evicted"
                assert time.monotonic() - started < FILL_LIMIT_SECONDS, "filling took too long"
                async with filler.pipeline(transaction=False) as pipe:
                    for _ in range(32):
                        pipe.set(f"filler:{uuid.uuid4().hex}", value)
                    await pipe.execute()
                written += 32 * FILLER_BYTES
            evicted = int((await filler.info("stats"))["evicted_keys"])
        finally:
            await filler.aclose()
        assert evicted > 0

        retry = await client.post("/chat", json=body, headers=headers)

    assert retry.status_code == 200, retry.text
    assert retry.json()["turn_id"] == first.json()["turn_id"]
    assert retry.json()["answer"] == first.json()["answer"] == "answer 0"
    assert len(model.answer_prompts()) == 1
    assert await turns_of(db, who) == 1


async def test_an_evicting_redis_is_warned_of_and_degrades_readiness(
    settings: Settings,
    sessionmaker: async_sessionmaker[AsyncSession],
    server: PrivateRedis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="app.core.redis"):
        async with evicting_app(settings, sessionmaker, server) as (_application, client):
            ready = await client.get("/readyz")
    assert any("maxmemory-policy is allkeys-lru" in r.getMessage() for r in caplog.records)
    assert ready.status_code == 200  # degraded, still ready
    assert ready.json()["status"] == "degraded"
    assert ready.json()["checks"]["redis"] == {
        "status": "evicting",
        "mode": "server",
        "maxmemory_policy": "allkeys-lru",
    }
