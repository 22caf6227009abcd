"""A process killed mid-turn, or stopped with SIGTERM mid-stream: nothing stuck, nothing lost.

The API runs as a real `threadline serve` process with a slow OpenAI-compatible model on
loopback (tests/fake_llm_server.py); another "process" is an app in this test process on the
same database and Redis. Leases are short here (2 s, renewed every 0.3 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from redis.asyncio import Redis
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.core.db import scope_to_tenant
from app.main import create_app
from app.models import ChatSession, QueryHistory
from tests.chat_helpers import parse_sse
from tests.factories import LoggedIn, login, make_session, make_tenant, make_user
from tests.fake_llm_server import answer_words, fake_llm_server
from tests.server_process import ServerProcess, SseReader, server_processes

pytestmark = pytest.mark.committed

WORDS = 400  # 20 s at 50 ms a word: far longer than any test waits
FULL_ANSWER = "".join(answer_words(WORDS))
LEASE = {
    "turn_lease_seconds": 2.0,
    "turn_lease_renew_seconds": 0.3,
    "turn_sweep_seconds": 600.0,  # sweeps are run by hand here, so each path is seen
}
QUESTION = "Tell me about the quarterly numbers of project Apollo."


@pytest.fixture(scope="module")
def slow_model() -> Iterator[str]:
    # `/chat` asks for its answer whole: that takes the 20 s too, so the `/chat` turn is still
    # generating when the process is killed (an instant answer raced the kill: the turn could
    # be stored complete before it, its idempotency record still `running`).
    with fake_llm_server(words=WORDS, token_delay=0.05, paced_whole=True) as url:
        yield url


@pytest.fixture(scope="module")
def shared(test_database: Settings) -> Settings:
    """The settings the server processes and this process share (one Redis prefix)."""
    return test_database.model_copy(update={"redis_prefix": f"tl-test-{uuid.uuid4().hex[:8]}:"})


@pytest.fixture(scope="module")
def servers(shared: Settings, slow_model: str) -> Iterator[list[ServerProcess]]:
    """Two server processes, one per test (each ends its own), started together."""
    with server_processes(shared, 2, **_env(slow_model)) as started:
        yield started


def _env(model_url: str) -> dict[str, str]:
    env = {f"THREADLINE_{k.upper()}": str(v) for k, v in LEASE.items()}
    env.update(
        THREADLINE_LLM="openai-compatible",
        OPENAI_BASE_URL=model_url,
        THREADLINE_AGENT_TOOLS="false",
    )
    return env


@asynccontextmanager
async def _survivor(settings: Settings) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """Another API process on the same database and Redis (its own engine and hub)."""
    app = create_app(settings.model_copy(update=LEASE))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://survivor.test", timeout=30
        ) as client:
            yield app, client


class Stream:
    """One `/chat/stream` request to the server process, read as far as the test wants."""

    def __init__(self, reader: SseReader, response: httpx.Response, body: dict[str, Any]):
        self.reader = reader
        self.response = response
        self.body = body

    @property
    def turn_id(self) -> str:
        return self.response.headers["x-turn-id"]

    async def read_tokens(self, count: int) -> None:
        while sum(e.name == "token" for e in self.reader.events) < count:
            assert await self.reader.next() is not None, "the stream ended early"


async def _open_stream(
    stack: AsyncExitStack,
    client: httpx.AsyncClient,
    who: LoggedIn,
    chat: ChatSession,
    key: str | None = None,
) -> Stream:
    body = {"session_id": str(chat.id), "message": QUESTION}
    headers = {**who.headers, **({"Idempotency-Key": key} if key else {})}
    response = await stack.enter_async_context(
        client.stream("POST", "/chat/stream", json=body, headers=headers)
    )
    assert response.status_code == 200
    return Stream(SseReader(response.aiter_lines()), response, body)


async def _stored(db: AsyncSession, tenant_id: uuid.UUID, turn_id: str) -> QueryHistory:
    await scope_to_tenant(db, tenant_id)
    turn = await db.scalar(
        select(QueryHistory)
        .where(QueryHistory.id == uuid.UUID(turn_id))
        .execution_options(populate_existing=True)
    )
    await db.commit()
    assert turn is not None
    return turn


async def _turns_of(db: AsyncSession, tenant_id: uuid.UUID, chat: ChatSession) -> list[Any]:
    await scope_to_tenant(db, tenant_id)
    rows = await db.execute(
        select(
            QueryHistory.id,
            QueryHistory.status,
            QueryHistory.lease_expires_at,
            func.clock_timestamp(),
        ).where(QueryHistory.session_id == chat.id)
    )
    await db.commit()
    return [tuple(row) for row in rows]


async def _lease_expired(db: AsyncSession, tenant_id: uuid.UUID, turn_id: str) -> bool:
    await scope_to_tenant(db, tenant_id)
    expired = await db.scalar(
        select(QueryHistory.lease_expires_at < func.clock_timestamp()).where(
            QueryHistory.id == uuid.UUID(turn_id)
        )
    )
    await db.commit()
    return bool(expired)


async def _buffer_last(settings: Settings, turn_id: str) -> tuple[str, dict[str, Any]] | None:
    redis = Redis.from_url(settings.redis_url or "", decode_responses=True)
    try:
        key = f"{settings.redis_prefix}stream:{turn_id}:events"
        entries: Any = await redis.xrevrange(key, count=1)
    finally:
        await redis.aclose()
    if not entries:
        return None
    fields = entries[0][1]
    return str(fields["n"]), json.loads(fields["d"])


def _assert_kept_partial(stored: QueryHistory, seen: str) -> None:
    assert stored.status == "incomplete"
    assert len(seen) > 0
    assert stored.answer.startswith(seen), (stored.answer[:80], seen[:80])
    assert FULL_ANSWER.startswith(stored.answer)
    assert stored.answer != FULL_ANSWER


async def test_a_turn_whose_process_was_killed_is_finished_with_its_partial_answer(
    shared: Settings, db: AsyncSession, servers: list[ServerProcess]
) -> None:
    settings = shared
    tenant = await make_tenant(db)
    user = await make_user(db, tenant)
    chats = [await make_session(db, user) for _ in range(4)]
    key, json_key = f"retry-{uuid.uuid4().hex}", f"retry-{uuid.uuid4().hex}"

    async def is_generating(chat: ChatSession) -> bool:
        await scope_to_tenant(db, tenant.id)
        started = await db.scalar(
            select(func.count()).where(
                QueryHistory.session_id == chat.id, QueryHistory.status == "pending"
            )
        )
        await db.commit()
        return bool(started)

    async with _survivor(settings) as (survivor_app, survivor):
        streams = await _stream_then_kill(
            settings, servers[0], user, chats, (key, json_key), is_generating
        )
        stopped, resumed, swept = streams
        who = await login(survivor, user)

        # Stop: the owner is gone (nobody listens on its channel), so the turn is finished
        # here and now, even before its lease has run out.
        stop = await survivor.post(f"/chat/{stopped.turn_id}/stop", headers=who.headers)
        assert stop.status_code == 200, stop.text
        assert stop.json() == {"turn_id": stopped.turn_id, "status": "stopped"}
        _assert_kept_partial(await _stored(db, tenant.id, stopped.turn_id), stopped.reader.text())

        # Resume: the stream ends with the terminal event once the lease has expired.
        last_id = resumed.reader.last_id()
        async with survivor.stream(
            "GET",
            f"/chat/{resumed.turn_id}/stream",
            headers={**who.headers, "Last-Event-ID": str(last_id)},
        ) as response:
            raw = (await asyncio.wait_for(response.aread(), timeout=15)).decode()
        events, _ = parse_sse(raw)
        assert events[-1].name == "done"
        assert events[-1].data["status"] == "incomplete"
        stored = await _stored(db, tenant.id, resumed.turn_id)
        _assert_kept_partial(stored, resumed.reader.text())
        streamed = resumed.reader.text() + "".join(
            e.data["text"] for e in events if e.name == "token"
        )
        assert events[-1].data["answer"] == stored.answer == streamed

        # A retry with the same Idempotency-Key replays that turn: no second row.
        retry_headers = {**who.headers, "Idempotency-Key": key}
        async with survivor.stream(
            "POST", "/chat/stream", json=resumed.body, headers=retry_headers
        ) as response:
            raw = (await asyncio.wait_for(response.aread(), timeout=15)).decode()
            assert response.headers["x-turn-id"] == resumed.turn_id
        replay, _ = parse_sse(raw)
        assert replay[-1].name == "done" and replay[-1].data["answer"] == stored.answer
        await scope_to_tenant(db, tenant.id)
        rows = await db.scalar(
            select(func.count()).where(
                QueryHistory.session_id == uuid.UUID(resumed.body["session_id"])
            )
        )
        await db.commit()
        assert rows == 1

        # A `/chat` retry with the first request's key waits for that turn, which is
        # finished once its lease has expired: its answer, not a second run.
        retried = await survivor.post(
            "/chat",
            json={"session_id": str(chats[3].id), "message": QUESTION},
            headers={**who.headers, "Idempotency-Key": json_key},
        )
        assert retried.status_code == 200, (
            retried.text,
            await _turns_of(db, tenant.id, chats[3]),
            await survivor_app.state.resources.redis.client.get(
                survivor_app.state.resources.guards.idempotency.key(tenant.id, user.id, json_key)
            ),
        )  # what the first request left, should this ever fail again
        assert retried.json()["status"] == "incomplete"
        await scope_to_tenant(db, tenant.id)
        json_turns = (
            await db.scalars(select(QueryHistory).where(QueryHistory.session_id == chats[3].id))
        ).all()
        await db.commit()
        assert [str(t.id) for t in json_turns] == [retried.json()["turn_id"]]
        assert json_turns[0].status == "incomplete"

        # The sweep finishes the orphan nobody asked about, and ends its buffered stream.
        for _ in range(100):
            if await _lease_expired(db, tenant.id, swept.turn_id):
                break
            await asyncio.sleep(0.05)
        leases = survivor_app.state.resources.guards.leases
        assert await leases.sweep() >= 1
        _assert_kept_partial(await _stored(db, tenant.id, swept.turn_id), swept.reader.text())
        last = await _buffer_last(settings, swept.turn_id)
        assert last is not None and last[0] == "done" and last[1]["status"] == "incomplete"


async def _stream_then_kill(
    settings: Settings,
    server: ServerProcess,
    user: Any,
    chats: list[ChatSession],
    keys: tuple[str, str],
    is_generating: Callable[[ChatSession], Awaitable[bool]],
) -> list[Stream]:
    """Three live streams, read for a few tokens each, and a `/chat` request whose turn is
    generating; the server is killed once its buffer holds what the clients have seen (it is
    written just after the client's stream: what a process sent in its last milliseconds may
    be lost with it). Nothing is read after that."""
    key, json_key = keys
    async with (
        httpx.AsyncClient(base_url=server.url, timeout=30) as client,
        AsyncExitStack() as stack,
    ):
        who = await login(client, user)
        streams = [
            await _open_stream(stack, client, who, chats[0]),
            await _open_stream(stack, client, who, chats[1], key),
            await _open_stream(stack, client, who, chats[2]),
        ]
        for stream in streams:
            await stream.read_tokens(3)
        for stream in streams:
            for _ in range(200):
                buffered = await _buffered_tokens(settings, stream.turn_id)
                if buffered.startswith(stream.reader.text()):
                    break
                await asyncio.sleep(0.02)
        # A `/chat` request (answered as JSON once complete) is on its way too.
        answer = asyncio.create_task(
            client.post(
                "/chat",
                json={"session_id": str(chats[3].id), "message": QUESTION},
                headers={**who.headers, "Idempotency-Key": json_key},
            )
        )
        for _ in range(500):
            if await is_generating(chats[3]):
                break
            await asyncio.sleep(0.02)
        else:
            pytest.fail("the `/chat` request's turn was never recorded before the kill")
        server.signal(signal.SIGKILL)
        server.wait(timeout=10)
        with contextlib.suppress(httpx.HTTPError):
            await answer
        with contextlib.suppress(httpx.HTTPError):
            await stack.aclose()
    return streams


async def _buffered_tokens(settings: Settings, turn_id: str) -> str:
    redis = Redis.from_url(settings.redis_url or "", decode_responses=True)
    try:
        entries: Any = await redis.xrange(f"{settings.redis_prefix}stream:{turn_id}:events")
    finally:
        await redis.aclose()
    return "".join(json.loads(f["d"])["text"] for _, f in entries if f["n"] == "token")


async def test_sigterm_ends_a_live_stream_with_done_in_the_client_and_the_buffer(
    shared: Settings, db: AsyncSession, servers: list[ServerProcess]
) -> None:
    settings, server = shared, servers[1]
    tenant = await make_tenant(db)
    user = await make_user(db, tenant)
    chat = await make_session(db, user)
    async with (
        httpx.AsyncClient(base_url=server.url, timeout=30) as client,
        AsyncExitStack() as stack,
    ):
        who = await login(client, user)
        stream = await _open_stream(stack, client, who, chat)
        await stream.read_tokens(3)
        server.signal(signal.SIGTERM)
        while await stream.reader.next() is not None:
            pass
    assert server.wait(timeout=15) == 0
    terminal = stream.reader.events[-1]
    assert terminal.name == "done"
    assert terminal.data["status"] == "incomplete"
    assert terminal.data["reason"] == "shutdown"
    seen = stream.reader.text()
    assert terminal.data["answer"] == seen
    stored = await _stored(db, tenant.id, stream.turn_id)
    _assert_kept_partial(stored, seen)
    last = await _buffer_last(settings, stream.turn_id)
    assert last is not None
    assert last[0] == "done" and last[1]["answer"] == seen
