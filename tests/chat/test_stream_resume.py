"""Resume with Last-Event-ID (on another process), stop, and what disconnects leave behind."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.conversation.pipeline.budget import SYSTEM_PROMPT
from app.conversation.streaming.resume import resumed_stream
from app.conversation.streaming.sse import format_event
from app.core.db import scope_to_tenant
from app.llm.tokens import count_tokens
from app.models import QueryHistory
from tests.chat.stream_driver import other_process, stream_until
from tests.chat_helpers import Event, finished_turn, parse_sse, use_model
from tests.factories import make_chatter, make_turn
from tests.fakes import ScriptedChatModel

pytestmark = pytest.mark.committed

ANSWER = " ".join(f"word{i}" for i in range(50))


async def _stored_turn(db: AsyncSession, tenant_id: uuid.UUID, turn_id: str) -> QueryHistory:
    return await finished_turn(db, tenant_id, QueryHistory.id == uuid.UUID(turn_id))


async def _pending_turn_id(db: AsyncSession, tenant_id: uuid.UUID) -> str:
    await scope_to_tenant(db, tenant_id)
    turn_id = await db.scalar(select(QueryHistory.id).where(QueryHistory.status == "pending"))
    await db.commit()
    return str(turn_id)


async def _resume(
    client: httpx.AsyncClient, headers: dict[str, str], turn_id: str, last_id: str | None
) -> tuple[httpx.Response, list[Event]]:
    extra = {} if last_id is None else {"Last-Event-ID": last_id}
    async with client.stream(
        "GET", f"/chat/{turn_id}/stream", headers={**headers, **extra}
    ) as response:
        raw = (await response.aread()).decode()
    return response, (parse_sse(raw)[0] if response.status_code == 200 else [])


def _cut_after(marker: bytes, count: int = 1) -> Any:
    return lambda received: received.count(marker) >= count


@pytest.mark.parametrize(
    ("where", "cut"),
    [
        ("before the first token", _cut_after(b"event: meta")),
        ("mid-answer", _cut_after(b"event: token", 20)),
        ("after sources", _cut_after(b"event: sources")),
    ],
)
async def test_a_cut_stream_resumes_on_another_process_without_gap_or_duplicate(
    app: FastAPI,
    client: httpx.AsyncClient,
    db: AsyncSession,
    settings: Settings,
    sessionmaker: async_sessionmaker[AsyncSession],
    where: str,
    cut: Any,
) -> None:
    tenant, _user, chat, owner = await make_chatter(client, db)
    model = ScriptedChatModel(reply=lambda _: ANSWER, token_delay=0.01)
    use_model(app, model)
    body = {"session_id": str(chat.id), "message": "tell me everything"}

    raw, headers = await stream_until(app, owner.headers, body, cut)
    before, _ = parse_sse(raw.decode())
    turn_id = headers["x-turn-id"]
    assert before and before[0].name == "meta" and before[0].data["turn_id"] == turn_id

    async with other_process(settings, sessionmaker) as (_, other):
        response, after = await _resume(other, owner.headers, turn_id, before[-1].id)
    assert response.status_code == 200, where
    events = before + after
    assert [int(e.id or 0) for e in events] == list(range(1, len(events) + 1)), where
    assert [e.name for e in events][-2:] == ["sources", "done"]
    done = events[-1].data
    assert done["status"] == "complete", where
    assert "".join(e.data["text"] for e in events if e.name == "token") == done["answer"]
    assert model.tokens_streamed == 50  # one generation, finished for the resumed client
    assert len(model.answer_prompts()) == 1
    assert (await _stored_turn(db, tenant.id, turn_id)).status == "complete"


async def test_resuming_after_the_end_replays_only_what_was_missed(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    _tenant, _user, chat, owner = await make_chatter(client, db)
    async with client.stream(
        "POST",
        "/chat/stream",
        json={"session_id": str(chat.id), "message": "Refunds?"},
        headers=owner.headers,
    ) as response:
        full, _ = parse_sse((await response.aread()).decode())
        turn_id = response.headers["x-turn-id"]
    _, replay = await _resume(client, owner.headers, turn_id, "2")
    assert [(e.id, e.name, e.data) for e in replay] == [(e.id, e.name, e.data) for e in full[2:]]
    _, everything = await _resume(client, owner.headers, turn_id, None)
    assert [e.id for e in everything] == [e.id for e in full]


async def test_another_users_stream_is_404_and_a_bad_last_event_id_is_400(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    _tenant, _user, chat, owner = await make_chatter(client, db)
    _t2, _u2, _c2, stranger = await make_chatter(client, db)
    async with client.stream(
        "POST",
        "/chat/stream",
        json={"session_id": str(chat.id), "message": "Refunds?"},
        headers=owner.headers,
    ) as response:
        await response.aread()
        turn_id = response.headers["x-turn-id"]
    foreign, _ = await _resume(client, stranger.headers, turn_id, "1")
    assert foreign.status_code == 404
    assert foreign.json()["error"]["code"] == "stream_not_found"
    unknown, _ = await _resume(client, owner.headers, str(uuid.uuid4()), "1")
    assert unknown.status_code == 404
    bad, _ = await _resume(client, owner.headers, turn_id, "abc")
    assert bad.status_code == 400


async def test_stop_from_another_process_cancels_the_model_and_stores_the_partial_answer(
    app: FastAPI,
    client: httpx.AsyncClient,
    db: AsyncSession,
    settings: Settings,
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    tenant, _user, chat, owner = await make_chatter(client, db)
    model = ScriptedChatModel(reply=lambda _: ANSWER, token_delay=0.03)
    use_model(app, model)
    body = {"session_id": str(chat.id), "message": "go"}
    async with other_process(settings, sessionmaker) as (_, other):
        streaming = asyncio.create_task(stream_until(app, owner.headers, body, lambda _: False))
        for _ in range(500):
            if model.tokens_streamed >= 5:
                break
            await asyncio.sleep(0.01)
        turn_id = await _pending_turn_id(db, tenant.id)
        stop = await other.post(f"/chat/{turn_id}/stop", headers=owner.headers)
        assert stop.status_code == 202, stop.text
        assert stop.json() == {"turn_id": turn_id, "status": "stopping"}
        raw, headers = await streaming
    assert headers["x-turn-id"] == turn_id
    events, _ = parse_sse(raw.decode())

    done = events[-1]
    assert done.name == "done"
    assert done.data["status"] == "incomplete" and done.data["stopped"] is True
    streamed = "".join(e.data["text"] for e in events if e.name == "token")
    assert done.data["answer"] == streamed
    assert [int(e.id or 0) for e in events] == list(range(1, len(events) + 1))
    stored = await _stored_turn(db, tenant.id, turn_id)
    assert stored.status == "incomplete"
    assert stored.answer == streamed
    generated = model.tokens_streamed
    assert generated < 50
    await asyncio.sleep(0.2)
    assert model.tokens_streamed == generated  # the model call is gone
    again = await client.post(f"/chat/{turn_id}/stop", headers=owner.headers)
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "turn_not_running"


async def test_stopping_someone_elses_turn_is_404(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    _tenant, _user, chat, owner = await make_chatter(client, db)
    _t2, _u2, _c2, stranger = await make_chatter(client, db)
    response = await client.post(
        "/chat", json={"session_id": str(chat.id), "message": "Refunds?"}, headers=owner.headers
    )
    turn_id = response.json()["turn_id"]
    assert (await client.post(f"/chat/{turn_id}/stop", headers=stranger.headers)).status_code == 404


async def test_without_a_resuming_client_generation_stops_after_the_grace_period(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant, _user, chat, owner = await make_chatter(client, db)
    resources = app.state.resources
    resources.settings = resources.settings.model_copy(update={"sse_resume_grace_seconds": 0.3})
    model = ScriptedChatModel(reply=lambda _: ANSWER, token_delay=0.05)
    use_model(app, model)
    _, headers = await stream_until(
        app,
        owner.headers,
        {"session_id": str(chat.id), "message": "go"},
        _cut_after(b"event: token", 2),
    )
    turn = await _stored_turn(db, tenant.id, headers["x-turn-id"])
    assert turn.status == "incomplete"
    assert model.tokens_streamed < 50


def _tasks() -> set[asyncio.Task[object]]:
    """The loop's tasks but psycopg's pool workers, which the checkpoint pool starts and
    retires on its own schedule (its connections are checked separately below)."""
    return {t for t in asyncio.all_tasks() if "AsyncConnectionPool.worker" not in repr(t)}


async def test_many_abrupt_disconnects_return_tasks_and_connections_to_baseline(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    _tenant, _user, chat, owner = await make_chatter(client, db)
    resources = app.state.resources
    resources.settings = resources.settings.model_copy(update={"sse_resume_grace_seconds": 0})
    use_model(app, ScriptedChatModel(reply=lambda _: ANSWER, token_delay=0.005))
    body = {"session_id": str(chat.id), "message": "go"}
    await stream_until(app, owner.headers, body, _cut_after(b"event: token", 1))  # warm up
    await asyncio.sleep(0.3)
    pool = resources.turn_context.sessionmaker.kw["bind"].pool
    tasks_before, checked_out_before = _tasks(), pool.checkedout()

    for batch in range(10):  # 100 disconnects, 10 at a time, at varying points
        await asyncio.gather(
            *(
                stream_until(app, owner.headers, body, _cut_after(b"event: token", 1 + i + batch))
                for i in range(10)
            )
        )
    for _ in range(100):
        await asyncio.sleep(0.05)
        if not resources.guards.streams.runs and _tasks() <= tasks_before:
            break
    assert resources.guards.streams.runs == {}
    assert _tasks() <= tasks_before  # nothing the disconnected streams started lives on
    assert pool.checkedout() == checked_out_before
    stats = resources.checkpoint_pool.get_stats()
    assert stats.get("pool_size", 0) == stats.get("pool_available", 0)  # none checked out


LEAKY = (
    f"Sure. {SYSTEM_PROMPT.split('. ')[0]}. Write to mario.rossi@example.com today. "
    + " ".join(f"more{i}" for i in range(60))
)


async def test_a_stopped_turn_returns_and_stores_its_partial_answer_checked(
    app: FastAPI,
    client: httpx.AsyncClient,
    db: AsyncSession,
    settings: Settings,
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    """A partial answer is history too: the output guardrail checks it like a complete one."""
    tenant, _user, chat, owner = await make_chatter(client, db)
    model = ScriptedChatModel(reply=lambda _: LEAKY, token_delay=0.03)
    use_model(app, model)
    body = {"session_id": str(chat.id), "message": "What is the travel policy?"}
    async with other_process(settings, sessionmaker) as (_, other):
        streaming = asyncio.create_task(stream_until(app, owner.headers, body, lambda _: False))
        for _ in range(500):
            if model.tokens_streamed >= 30:  # past the leaked sentence and the address
                break
            await asyncio.sleep(0.01)
        turn_id = await _pending_turn_id(db, tenant.id)
        stop = await other.post(f"/chat/{turn_id}/stop", headers=owner.headers)
        assert stop.status_code == 202, stop.text
        raw, _headers = await streaming
    events, _ = parse_sse(raw.decode())
    streamed = "".join(e.data["text"] for e in events if e.name == "token")
    assert "mario.rossi@example.com" in streamed and "You are Threadline" in streamed

    done = events[-1].data
    assert done["stopped"] is True and done["status"] == "incomplete"
    assert "mario.rossi@example.com" not in done["answer"] and "[EMAIL]" in done["answer"]
    assert "You are Threadline" not in done["answer"]
    assert " ".join(done["answer"].split()).startswith("Sure. Write to [EMAIL] today.")
    issues = done["validation"]["output_guardrail"]["issues"]
    assert "personal data removed: EMAIL" in issues
    assert any(i.startswith("system prompt leaked") for i in issues)
    assert done["triage"]["route"] == "llm"
    assert done["context_metadata"] == {"triage": done["triage"], "validation": done["validation"]}

    stored = await _stored_turn(db, tenant.id, turn_id)
    assert stored.status == "incomplete"
    assert stored.answer == done["answer"]
    assert stored.context_metadata["validation"] == done["validation"]
    assert stored.context_metadata["triage"] == done["triage"]
    original = stored.context_metadata["audit"]["original_answer"]
    assert "You are Threadline" in original and "mario.rossi@example.com" not in original


async def _charged(app: FastAPI, tenant_id: uuid.UUID, user_id: uuid.UUID) -> int:
    """The user's token count today, once the run's accounting has settled it (until then
    it holds the turn's reservation, ADR 0049)."""
    redis, limiter = app.state.resources.redis, app.state.resources.guards.limiter
    key = limiter._keys(tenant_id, user_id, time.time())["user_day"]
    for _ in range(100):
        value = await redis.client.get(key)
        if value is not None and int(value) != limiter.reservation:
            return int(value)
        await asyncio.sleep(0.05)
    raise AssertionError("nothing was charged")


def _prompt_tokens(model: ScriptedChatModel) -> int:
    (prompt,) = model.answer_prompts()
    return sum(count_tokens(str(m.content)) for m in prompt)


async def test_a_stopped_stream_is_charged_its_prompt_and_its_streamed_text(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant, user, chat, owner = await make_chatter(client, db)
    model = ScriptedChatModel(reply=lambda _: ANSWER, token_delay=0.03)
    use_model(app, model)
    body = {"session_id": str(chat.id), "message": "go"}
    streaming = asyncio.create_task(stream_until(app, owner.headers, body, lambda _: False))
    for _ in range(500):
        if model.tokens_streamed >= 5:
            break
        await asyncio.sleep(0.01)
    turn_id = await _pending_turn_id(db, tenant.id)
    assert (await client.post(f"/chat/{turn_id}/stop", headers=owner.headers)).status_code == 202
    raw, _ = await streaming
    events, _ = parse_sse(raw.decode())
    streamed = "".join(e.data["text"] for e in events if e.name == "token")
    expected = _prompt_tokens(model) + count_tokens(streamed)
    assert events[-1].data["usage"]["total_tokens"] == expected
    charged = await _charged(app, tenant.id, user.id)
    assert charged == expected
    assert charged > _prompt_tokens(model) > len([e for e in events if e.name == "token"])


async def test_a_disconnected_stream_is_charged_its_prompt_and_its_streamed_text(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant, user, chat, owner = await make_chatter(client, db)
    resources = app.state.resources
    resources.settings = resources.settings.model_copy(update={"sse_resume_grace_seconds": 0})
    model = ScriptedChatModel(reply=lambda _: ANSWER, token_delay=0.02)
    use_model(app, model)
    body = {"session_id": str(chat.id), "message": "go"}
    _, headers = await stream_until(app, owner.headers, body, _cut_after(b"event: token", 3))
    stored = await _stored_turn(db, tenant.id, headers["x-turn-id"])
    assert stored.status == "incomplete"
    # The stored partial answer is what the run generated (the client saw a prefix of it).
    assert await _charged(app, tenant.id, user.id) == _prompt_tokens(model) + count_tokens(
        stored.answer or ""
    )


async def test_a_stop_no_process_receives_stores_the_turn_incomplete_at_once(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant, _user, chat, owner = await make_chatter(client, db)
    # The process that ran this turn died: it is pending, and nobody listens for stops.
    turn = await make_turn(db, chat, answer="", status="pending")
    await app.state.resources.guards.streams.close()

    stop = await client.post(f"/chat/{turn.id}/stop", headers=owner.headers)

    assert stop.status_code == 200, stop.text
    assert stop.json() == {"turn_id": str(turn.id), "status": "stopped"}
    stored = await _stored_turn(db, tenant.id, str(turn.id))
    assert stored.status == "incomplete"
    assert stored.context_metadata["error"]["code"] == "run_lost"
    again = await client.post(f"/chat/{turn.id}/stop", headers=owner.headers)
    assert again.status_code == 409


@pytest.mark.parametrize("evicted", ["events and owner", "events"])
async def test_a_finished_turn_whose_buffer_was_evicted_resumes_from_its_row(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, evicted: str
) -> None:
    """A Redis under memory pressure may evict a stream's buffer (issue 31 item 2), or only
    its events and not its owner (each is a key of its own): the resume then tells the
    stored answer at once, not 404 and not a minute of silence ending `stream_lost`."""
    _tenant, _user, chat, owner = await make_chatter(client, db)
    _t2, _u2, _c2, stranger = await make_chatter(client, db)
    async with client.stream(
        "POST",
        "/chat/stream",
        json={"session_id": str(chat.id), "message": "Refunds?"},
        headers=owner.headers,
    ) as response:
        full, _ = parse_sse((await response.aread()).decode())
        turn_id = response.headers["x-turn-id"]
    buffer = app.state.resources.guards.streams.buffer
    keys = [buffer.events_key(uuid.UUID(turn_id)), buffer.owner_key(uuid.UUID(turn_id))]
    await buffer.redis.client.delete(*keys[: 1 if evicted == "events" else 2])

    resumed, rest = await _resume(client, owner.headers, turn_id, "2")

    assert resumed.status_code == 200
    assert rest[-1].name == "done"
    assert rest[-1].data["answer"] == full[-1].data["answer"]
    assert rest[-1].data["status"] == "complete"
    ids = [int(e.id) for e in rest if e.id is not None]
    assert ids == sorted(ids) and ids[0] > 2
    late, after_end = await _resume(client, owner.headers, turn_id, str(int(full[-1].id or 0)))
    assert late.status_code == 200 and [e.name for e in after_end] == ["done"]
    assert int(after_end[0].id or 0) > int(full[-1].id or 0)
    foreign, _ = await _resume(client, stranger.headers, turn_id, "2")
    assert foreign.status_code == 404


@pytest.mark.parametrize("stored", [True, False])
async def test_a_buffer_evicted_while_followed_ends_with_the_stored_turn(
    app: FastAPI, stored: bool
) -> None:
    """Issue 31's eviction phase: the buffer was there when the resume began and was evicted
    before its events were read; the producer gone, the stream told `stream_lost` for a turn
    stored complete. Now the stored turn tells the rest; only a turn not stored is lost."""
    hub = app.state.resources.guards.streams
    turn_id = uuid.uuid4()  # its buffer holds nothing: evicted
    done = format_event(9, "done", {"turn_id": str(turn_id), "status": "complete"})
    asked: list[int] = []

    async def settle() -> bool:
        return True  # the producer is gone

    async def rest(after: int) -> AsyncIterator[bytes] | None:
        asked.append(after)

        async def events() -> AsyncIterator[bytes]:
            yield done

        return events() if stored else None

    chunks = [
        chunk
        async for chunk in resumed_stream(
            hub,
            turn_id,
            8,
            heartbeat_seconds=0.5,
            silence_limit_seconds=30,
            retry_ms=1000,
            settle=settle,
            settle_every_seconds=0.1,
            stored=rest,
        )
    ]
    assert asked == [8]
    events, _ = parse_sse(b"".join(chunks).decode())
    if stored:
        assert [e.name for e in events] == ["done"]
        assert events[0].data["status"] == "complete"
    else:
        assert [e.name for e in events] == ["error"]
        assert events[0].data["code"] == "stream_lost"
