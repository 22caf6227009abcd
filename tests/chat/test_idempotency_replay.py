"""An Idempotency-Key replays its answer only while the answer's turn exists."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from datetime import timedelta

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.conversation.durability.idempotency import fingerprint
from app.conversation.turn.schemas import ChatRequest
from app.core.db import scope_to_tenant
from app.models import QueryHistory
from tests.chat_helpers import stream_chat, use_model
from tests.factories import make_chatter, make_session
from tests.fakes import ScriptedChatModel

pytestmark = pytest.mark.committed


@pytest.mark.parametrize("endpoint", ["/chat", "/chat/stream"])
async def test_after_the_session_is_deleted_its_answers_are_not_replayed(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, endpoint: str
) -> None:
    _tenant, user, chat, owner = await make_chatter(client, db)
    model = ScriptedChatModel(reply=lambda _: "a private answer")
    use_model(app, model)
    body = {"session_id": str(chat.id), "message": "remember this"}
    headers = {**owner.headers, "Idempotency-Key": "delete-me"}
    if endpoint == "/chat":
        first = await client.post("/chat", json=body, headers=headers)
        assert first.status_code == 200
        replay = await client.post("/chat", json=body, headers=headers)
        assert replay.json()["turn_id"] == first.json()["turn_id"]  # replayed while it exists
    else:
        response, events, _ = await stream_chat(client, headers, body)
        assert response.status_code == 200
        assert events[-1].name == "done"
    assert len(model.answer_prompts()) == 1

    assert (await client.delete(f"/sessions/{chat.id}", headers=owner.headers)).status_code == 204

    if endpoint == "/chat":
        after = await client.post("/chat", json=body, headers=headers)
        assert after.status_code == 404, after.text
        assert after.json()["error"]["code"] == "session_not_found"
    else:
        after, events, _ = await stream_chat(client, headers, body)
        assert after.status_code == 404
        assert events == []
    assert len(model.answer_prompts()) == 1

    # The key is free again: a request in another session runs with it (no stale 422).
    fresh = await make_session(db, user)
    renewed = {"session_id": str(fresh.id), "message": "remember this"}
    again = await client.post("/chat", json=renewed, headers=headers)
    assert again.status_code == 200, again.text
    assert again.json()["session_id"] == str(fresh.id)
    assert len(model.answer_prompts()) == 2


@pytest.mark.parametrize("endpoint", ["/chat", "/chat/stream"])
async def test_a_key_whose_first_request_died_before_recording_its_turn_is_free_soon(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, endpoint: str
) -> None:
    """The first request claimed its key and died before its turn was written (nobody can
    finish a turn that does not exist): a retry is not held for a whole turn's lifetime; it
    is told to retry once the claim's short admission lifetime has lapsed, and the next one
    runs the request, once."""
    tenant, user, chat, owner = await make_chatter(client, db)
    model = ScriptedChatModel(reply=lambda _: "answered at last")
    use_model(app, model)
    body = {"session_id": str(chat.id), "message": "are you there?"}
    headers = {**owner.headers, "Idempotency-Key": "died-before-recording"}
    store = app.state.resources.guards.idempotency
    store.admission_ttl = 1

    async def never_recorded(_turn: uuid.UUID) -> bool:
        return False

    dead = await store.claim(
        tenant.id,
        user.id,
        "died-before-recording",
        fingerprint(endpoint, ChatRequest.model_validate(body)),
        uuid.uuid4(),
        never_recorded,
    )
    assert dead is not None and dead.won

    started = time.monotonic()
    if endpoint == "/chat":
        waited = await client.post("/chat", json=body, headers=headers)
    else:  # no buffer to join: waited for while the claim may be admitting, then 409
        waited, _events, _ = await stream_chat(client, headers, body)
        await waited.aread()
    assert waited.status_code == 409, waited.text
    assert waited.json()["error"]["code"] == "idempotent_request_failed"
    assert time.monotonic() - started < 10  # the claim's lapse, not the 90 s turn deadline
    if endpoint == "/chat/stream":
        response, events, _ = await stream_chat(client, headers, body)
        assert response.status_code == 200 and events[-1].name == "done"
        assert events[-1].data["answer"].startswith("answered at last")
        assert len(model.answer_prompts()) == 1
        return

    model.token_delay = 0.5  # the run outlasts the admission lifetime
    running = asyncio.create_task(client.post("/chat", json=body, headers=headers))
    await asyncio.sleep(1.5)
    assert not running.done()
    assert await app.state.resources.redis.client.ttl(dead.key) > 1  # recorded: a turn's life
    retried = await running
    assert retried.status_code == 200, retried.text
    assert retried.json()["answer"].startswith("answered at last")
    replayed = await client.post("/chat", json=body, headers=headers)
    assert replayed.json()["turn_id"] == retried.json()["turn_id"]
    assert len(model.answer_prompts()) == 1


async def test_a_turn_that_outlasts_its_claims_lifetime_keeps_its_key(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    """A slow model (long calls, retries, tool rounds) may keep a turn running past its
    claim's running lifetime: the claim is renewed with the turn's lease, so a retry in the
    meantime waits for the first answer instead of running the turn a second time."""
    _tenant, _user, chat, owner = await make_chatter(client, db)
    model = ScriptedChatModel(reply=lambda _: "one two three four five six", token_delay=0.5)
    use_model(app, model)
    app.state.resources.guards.idempotency.running_ttl = 2  # the turn takes about 3 s
    leases = app.state.resources.guards.leases
    body = {"session_id": str(chat.id), "message": "take your time"}
    headers = {**owner.headers, "Idempotency-Key": "outlasts-its-claim"}

    first = asyncio.create_task(client.post("/chat", json=body, headers=headers))
    for _ in range(10):  # the lease timer's renewals, at a test's pace
        await asyncio.sleep(0.25)
        await leases.renew()
    assert not first.done()  # 2.5 s in: past the claim's lifetime, still running
    retried = await client.post("/chat", json=body, headers=headers)
    answered = await first
    assert answered.status_code == retried.status_code == 200, (answered.text, retried.text)
    assert retried.json()["turn_id"] == answered.json()["turn_id"]
    assert len(model.answer_prompts()) == 1


@pytest.mark.parametrize("endpoint", ["/chat", "/chat/stream"])
async def test_a_stored_turn_whose_answer_never_reached_its_key_is_replayed_from_its_row(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, endpoint: str
) -> None:
    """The first request's process stored the turn and died (or lost Redis) before writing
    its answer under the key: a retry gets that turn's answer from its row, at once, and the
    key records it; the model is never asked twice."""
    tenant, user, chat, owner = await make_chatter(client, db)
    model = ScriptedChatModel(reply=lambda _: "Stored, never recorded [1].")
    use_model(app, model)
    body = {"session_id": str(chat.id), "message": "is it stored?"}
    headers = {**owner.headers, "Idempotency-Key": "never-recorded"}
    if endpoint == "/chat":
        first = (await client.post("/chat", json=body, headers=headers)).json()
    else:
        response, events, _ = await stream_chat(client, headers, body)
        assert response.status_code == 200 and events[-1].name == "done"
        first = {"turn_id": response.headers["x-turn-id"], **events[-1].data}
    redis = app.state.resources.redis.client
    key = app.state.resources.guards.idempotency.key(tenant.id, user.id, "never-recorded")
    stored = json.loads(await redis.get(key))
    running = {"fingerprint": stored["fingerprint"], "turn_id": stored["turn_id"]}
    await redis.set(key, json.dumps({**running, "state": "running"}))  # the write never came
    buffered = [k async for k in redis.scan_iter(match=f"*stream:{first['turn_id']}*")]
    if buffered:  # a stream's buffer has expired too
        await redis.delete(*buffered)
    await scope_to_tenant(db, tenant.id)
    await db.execute(  # and its owner's lease ran out long ago
        update(QueryHistory)
        .where(QueryHistory.id == uuid.UUID(first["turn_id"]))
        .values(lease_expires_at=func.now() - timedelta(minutes=5))
    )
    await db.commit()

    started = time.monotonic()
    if endpoint == "/chat":
        retried = await client.post("/chat", json=body, headers=headers)
        assert retried.status_code == 200, retried.text
        replayed = retried.json()
        assert replayed["sources"] == first["sources"]
    else:
        response, events, _ = await stream_chat(client, headers, body)
        assert response.status_code == 200, response.text
        assert [e.name for e in events] == ["meta", "token", "sources", "done"]
        replayed = {"turn_id": response.headers["x-turn-id"], **events[-1].data}
    assert time.monotonic() - started < 10
    assert (replayed["turn_id"], replayed["answer"]) == (first["turn_id"], first["answer"])
    assert replayed["status"] == "complete"
    assert len(model.answer_prompts()) == 1
    assert json.loads(await redis.get(key))["state"] == "done"
