"""Many clients following one slow turn (issue 33): they share one Redis reader, so the pool
stays free for everyone else's chat and logins; and one user may follow only so many streams
at once and per minute."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine

from app.config import Settings
from app.core.database_urls import resolve_database_urls
from app.core.db import create_sessionmaker
from app.main import create_app
from tests.chat.stream_driver import stream_until
from tests.chat_helpers import Event, parse_sse, use_model
from tests.factories import LoggedIn, make_chatter
from tests.fakes import ScriptedChatModel
from tests.private_redis import PrivateRedis, private_redis

pytestmark = pytest.mark.committed

POOL = 6
FOLLOWERS = 40
REPLY = " ".join(f"word{i}" for i in range(40))


@pytest.fixture
def server() -> Iterator[PrivateRedis]:
    with private_redis() as running:
        yield running


@pytest.fixture
async def roomy_sessionmaker(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession]
) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    engine = create_async_engine(resolve_database_urls(settings).app, pool_size=20)
    yield create_sessionmaker(engine)
    await engine.dispose()


async def _start_slow_stream(
    app: FastAPI, owner: LoggedIn, chat: str, model: ScriptedChatModel
) -> tuple[str, asyncio.Task[tuple[bytes, dict[str, str]]]]:
    """A stream whose model is slow, read to its end in the background (as a server would:
    httpx's ASGI transport would only return once it ended); its turn id once the first
    token is out."""
    body = {"session_id": chat, "message": "Go"}
    streaming = asyncio.create_task(stream_until(app, owner.headers, body, lambda _: False))
    runs = app.state.resources.guards.streams.runs
    for _ in range(200):
        if runs and model.tokens_generated >= 1:
            break
        await asyncio.sleep(0.05)
    assert len(runs) == 1
    return str(next(iter(runs))), streaming


async def _resume(
    client: httpx.AsyncClient, owner: LoggedIn, turn_id: str
) -> tuple[int, list[Event]]:
    async with client.stream(
        "GET", f"/chat/{turn_id}/stream", headers={**owner.headers, "Last-Event-ID": "1"}
    ) as response:
        raw = (await response.aread()).decode()
    return response.status_code, (parse_sse(raw)[0] if response.status_code == 200 else [])


def _answer(events: list[Event]) -> str:
    return "".join(str(e.data["text"]) for e in events if e.name == "token")


async def test_forty_followers_of_one_turn_leave_the_redis_pool_to_everyone_else(
    settings: Settings,
    roomy_sessionmaker: async_sessionmaker[AsyncSession],
    db: AsyncSession,
    server: PrivateRedis,
) -> None:
    bound = settings.model_copy(
        update={
            "redis_url": server.url,
            "redis_max_connections": POOL,
            "redis_pool_timeout_seconds": 1.0,
            "sse_follow_max_per_user": FOLLOWERS,
            "sse_follow_max_per_turn": FOLLOWERS,
            "sse_follow_per_user_per_min": 0,
            "max_in_flight_per_credential": FOLLOWERS + 8,  # the stream, the others' chat
        }
    )
    application = create_app(bound)
    async with application.router.lifespan_context(application):
        application.state.resources.use_sessionmaker(roomy_sessionmaker)
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://t.test") as client:
            _tenant, _user, chat, owner = await make_chatter(client, db)
            _other_tenant, _other, other_chat, other = await make_chatter(client, db)
            model = ScriptedChatModel(reply=lambda _: REPLY, token_delay=0.15)
            use_model(application, model)
            turn_id, streaming = await _start_slow_stream(application, owner, str(chat.id), model)

            followers = [
                asyncio.create_task(_resume(client, owner, turn_id)) for _ in range(FOLLOWERS)
            ]
            tail = application.state.resources.guards.streams.tail
            for _ in range(200):
                if tail.followed() >= FOLLOWERS:
                    break
                await asyncio.sleep(0.05)
            done_early = [f.result() for f in followers if f.done()]
            assert tail.followed() == FOLLOWERS, done_early[:2]
            assert not streaming.done()  # the turn is still running: they all wait on it

            # Everyone else's requests still get pooled connections at once.
            model_for_others = len(model.calls)
            answered = await client.post(
                "/chat",
                json={"session_id": str(other_chat.id), "message": "Hello there, which office?"},
                headers=other.headers,
            )
            assert answered.status_code == 200, answered.text
            assert len(model.calls) > model_for_others
            # The whole process holds the pool (at most POOL) and the tail's one connection.
            assert server.client_count() <= POOL + 1

            results = await asyncio.wait_for(asyncio.gather(*followers), 60)
            original = parse_sse((await streaming)[0].decode())[0]

    # Every follower got exactly the original stream's events after event 1, once each.
    expected = [(e.id, e.name, e.data) for e in original if e.id is not None and int(e.id) > 1]
    assert _answer(original) == REPLY
    assert [status for status, _ in results] == [200] * FOLLOWERS
    for _, events in results:
        assert [(e.id, e.name, e.data) for e in events if e.id is not None] == expected


async def test_a_user_follows_only_so_many_streams_of_one_turn(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    follows = app.state.resources.guards.follows
    follows.per_turn = 2
    _tenant, _user, chat, owner = await make_chatter(client, db)
    model = ScriptedChatModel(reply=lambda _: REPLY, token_delay=0.05)
    use_model(app, model)
    turn_id, streaming = await _start_slow_stream(app, owner, str(chat.id), model)

    results = await asyncio.gather(*(_resume(client, owner, turn_id) for _ in range(5)))
    await streaming

    followed = [events for status, events in results if status == 200 and _answer(events)]
    refused = [
        events
        for status, events in results
        if status == 429 or [e.name for e in events] == ["error"]
    ]
    assert len(followed) == 2
    assert len(refused) == 3
    for events in refused:
        if events:  # arrived together, past the check: ended at once, without an id
            assert events[0].data["code"] == "too_many_streams"
            assert events[0].id is None
    # The places are given back when the streams end.
    status, events = await _resume(client, owner, turn_id)
    assert status == 200 and events[-1].name == "done"


async def test_a_user_starts_only_so_many_follows_a_minute(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    app.state.resources.guards.follows.per_minute = 3
    _tenant, _user, chat, owner = await make_chatter(client, db)
    async with client.stream(
        "POST",
        "/chat/stream",
        json={"session_id": str(chat.id), "message": "Hi"},
        headers=owner.headers,
    ) as response:
        await response.aread()
        turn_id = response.headers["x-turn-id"]

    statuses = [(await _resume(client, owner, turn_id))[0] for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    refused = await client.get(
        f"/chat/{turn_id}/stream", headers={**owner.headers, "Last-Event-ID": "1"}
    )
    assert refused.json()["error"]["code"] == "too_many_streams"
    assert int(refused.headers["retry-after"]) >= 1


async def test_a_full_follower_is_refused_before_authentication_reads_postgresql(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    """Issue 33: 300 resumes at once were each refused only after authentication's two
    statements (about 6 ms each); every other connection waited behind them in the accept
    queue (`/healthz` p95 1.1 s). A user already following as many streams of the turn as
    allowed is refused on the token's signature alone."""
    follows = app.state.resources.guards.follows
    follows.per_turn = 1
    _tenant, _user, chat, owner = await make_chatter(client, db)
    model = ScriptedChatModel(reply=lambda _: REPLY, token_delay=0.05)
    use_model(app, model)
    turn_id, streaming = await _start_slow_stream(app, owner, str(chat.id), model)
    following = asyncio.create_task(_resume(client, owner, turn_id))
    tail = app.state.resources.guards.streams.tail
    for _ in range(200):
        if tail.followed() >= 1:
            break
        await asyncio.sleep(0.02)
    assert tail.followed() == 1

    statements: list[str] = []

    def record(*args: object) -> None:
        statements.append(str(args[2]))

    event.listen(Engine, "before_cursor_execute", record)
    try:
        refused = await client.get(
            f"/chat/{turn_id}/stream", headers={**owner.headers, "Last-Event-ID": "1"}
        )
    finally:
        event.remove(Engine, "before_cursor_execute", record)
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "too_many_streams"
    assert statements == []

    status, events = await following
    await streaming
    assert status == 200 and _answer(events)
