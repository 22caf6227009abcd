"""Slow readers hold a bounded backlog (issue 31, item 10; ADR 0083).

The model writes a long answer far faster than these clients read it (the ASGI `send` of a
slow socket blocks, as uvicorn's flow control does). What the process holds for one such
client stays under `sse_backlog_events`, whether it reads the run's own queue (a new stream)
or follows the Redis buffer (a resumed one), and the client still receives every event once,
in order, to the `done`.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, MutableMapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.conversation.streaming import buffer
from app.main import create_app
from app.models import QueryHistory
from tests.chat.stream_driver import stream_until
from tests.chat_helpers import Event, finished_turn, parse_sse, use_model
from tests.factories import LoggedIn, make_chatter
from tests.fakes import ScriptedChatModel
from tests.private_redis import private_redis

pytestmark = pytest.mark.committed

BACKLOG = 24
WORDS = 400
REPLY = " ".join(f"w{i}" for i in range(WORDS))


@dataclass
class Backlogs:
    """The most events the process held for any reader, sampled while the turn ran."""

    local: int = 0
    followers: int = 0
    fell_behind: bool = False
    samples: int = 0


@asynccontextmanager
async def _slow_app(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession]
) -> AsyncIterator[FastAPI]:
    application = create_app(settings.model_copy(update={"sse_backlog_events": BACKLOG}))
    async with application.router.lifespan_context(application):
        application.state.resources.use_sessionmaker(sessionmaker)
        yield application


async def _sample(app: FastAPI, backlogs: Backlogs, stop: asyncio.Event) -> None:
    hub = app.state.resources.guards.streams
    while not stop.is_set():
        backlogs.samples += 1
        for run in list(hub.runs.values()):
            backlogs.local = max(backlogs.local, run.queue.qsize())
            backlogs.fell_behind = backlogs.fell_behind or bool(getattr(run, "behind", False))
        queued = [q.qsize() for qs in list(hub.tail._followers.values()) for q in qs]
        backlogs.followers = max([backlogs.followers, *queued])
        await asyncio.sleep(0.002)


async def _read_slowly(
    app: FastAPI,
    method: str,
    path: str,
    headers: dict[str, str],
    body: dict[str, Any] | None,
    pause: float,
    first_pause: float = 0.0,
) -> bytes:
    """One request through the ASGI app, its response taken `pause` seconds per chunk (the
    first `first_pause`): the server's `send` waits, as it does on a socket whose reader is
    slow."""
    payload = json.dumps(body).encode() if body is not None else b""
    chunks: list[bytes] = []
    finished = asyncio.Event()
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": payload, "more_body": False}
        await finished.wait()
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            assert message["status"] == 200, message
        if message["type"] == "http.response.body":
            await asyncio.sleep(pause if chunks else max(pause, first_pause))
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                finished.set()

    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(payload)).encode()),
            *[(k.lower().encode(), v.encode()) for k, v in headers.items()],
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("threadline.test", 80),
    }
    await asyncio.wait_for(app(scope, receive, send), timeout=120)
    return b"".join(chunks)


def _numbered(events: list[Event]) -> list[tuple[int, str]]:
    return [(int(e.id), e.name) for e in events if e.id is not None]


def _answer(events: list[Event]) -> str:
    return "".join(str(e.data["text"]) for e in events if e.name == "token")


async def _chatter(app: FastAPI, db: AsyncSession) -> tuple[str, LoggedIn]:
    chat, owner, _tenant = await _chatter_of(app, db)
    return chat, owner


async def _chatter_of(app: FastAPI, db: AsyncSession) -> tuple[str, LoggedIn, uuid.UUID]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t.test") as client:
        tenant, _user, chat, owner = await make_chatter(client, db)
    return str(chat.id), owner, tenant.id


async def test_a_slow_reader_of_a_new_stream_holds_at_most_the_backlog_and_gets_every_event(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession], db: AsyncSession
) -> None:
    async with _slow_app(settings, sessionmaker) as app:
        chat, owner = await _chatter(app, db)
        model = ScriptedChatModel(reply=lambda _: REPLY)  # as fast as it can
        use_model(app, model)
        backlogs, stop = Backlogs(), asyncio.Event()
        sampling = asyncio.create_task(_sample(app, backlogs, stop))
        raw = await _read_slowly(
            app, "POST", "/chat/stream", owner.headers, {"session_id": chat, "message": "Go"}, 0.003
        )
        stop.set()
        await sampling

    events, _ = parse_sse(raw.decode())
    numbered = _numbered(events)
    # The model ran far ahead of the reader, yet the process never held more than the bound.
    assert backlogs.samples > 50
    assert backlogs.local <= BACKLOG, backlogs
    assert backlogs.followers <= BACKLOG, backlogs
    assert backlogs.fell_behind
    # Every event once, in order, ids 1..n without a gap, ending with the `done`.
    assert [event_id for event_id, _ in numbered] == list(range(1, len(numbered) + 1))
    assert numbered[-1][1] == "done"
    assert events[-1].data["status"] == "complete"
    assert _answer(events) == REPLY
    assert model.tokens_generated == WORDS


async def test_a_slow_resumed_reader_holds_at_most_the_backlog_and_gets_every_event(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession], db: AsyncSession
) -> None:
    async with _slow_app(settings, sessionmaker) as app:
        chat, owner = await _chatter(app, db)
        # The turn is written over ~1.2 s; the resumed reader needs ~4 s to read it.
        model = ScriptedChatModel(reply=lambda _: REPLY, token_delay=0.003)
        use_model(app, model)
        body = {"session_id": chat, "message": "Go"}
        original = asyncio.create_task(stream_until(app, owner.headers, body, lambda _: False))
        runs = app.state.resources.guards.streams.runs
        for _ in range(400):
            if runs and model.tokens_generated >= 5:
                break
            await asyncio.sleep(0.01)
        turn_id = str(next(iter(runs)))
        backlogs, stop = Backlogs(), asyncio.Event()
        sampling = asyncio.create_task(_sample(app, backlogs, stop))
        headers = {**owner.headers, "Last-Event-ID": "0"}
        raw = await _read_slowly(app, "GET", f"/chat/{turn_id}/stream", headers, None, 0.01)
        stop.set()
        await sampling
        first, _ = parse_sse((await original)[0].decode())

    assert backlogs.samples > 50
    assert backlogs.followers <= BACKLOG, backlogs
    events, _ = parse_sse(raw.decode())
    expected = [(int(e.id), e.name, e.data) for e in first if e.id is not None]
    assert [(int(e.id), e.name, e.data) for e in events if e.id is not None] == expected
    assert _answer(events) == REPLY
    assert events[-1].name == "done"


async def test_a_slow_reader_of_a_stream_without_a_buffer_is_told_and_the_answer_is_stored(
    settings: Settings,
    sessionmaker: async_sessionmaker[AsyncSession],
    db: AsyncSession,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Redis is down: the stream's buffer is given up (after this long) and cannot be followed.
    monkeypatch.setattr(buffer, "GIVE_UP_SECONDS", 0.2)
    with private_redis() as server:
        bound = settings.model_copy(update={"redis_url": server.url})
        async with _slow_app(bound, sessionmaker) as app:
            chat, owner, tenant_id = await _chatter_of(app, db)
            model = ScriptedChatModel(reply=lambda _: REPLY, token_delay=0.002)
            use_model(app, model)
            server.stop()
            backlogs, stop = Backlogs(), asyncio.Event()
            sampling = asyncio.create_task(_sample(app, backlogs, stop))
            # The client takes a second over the first bytes: the answer runs far ahead.
            raw = await _read_slowly(
                app,
                "POST",
                "/chat/stream",
                owner.headers,
                {"session_id": chat, "message": "Go"},
                0.003,
                first_pause=1.0,
            )
            where = QueryHistory.session_id == uuid.UUID(chat)
            turn = await finished_turn(db, tenant_id, where)
            stop.set()
            await sampling

    assert backlogs.local <= BACKLOG, backlogs
    events, _ = parse_sse(raw.decode())
    # Told, without an id (nothing after it can be resumed from a missing buffer) ...
    assert events[-1].name == "error" and events[-1].id is None
    assert events[-1].data["code"] == "stream_too_slow"
    # ... and the run was not cut for it: the whole answer is stored for the session.
    assert turn.status == "complete"
    assert turn.answer == REPLY
