"""A retried request replays only what its user may still see (ADR 0087): a `/chat`,
`/chat/stream` or `/v1/chat/completions` request retried with its Idempotency-Key after the
user left the group of a cited document's collection gets the stored answer with that
source withheld, as the turns listing withholds it: no title, no snippet, `withheld: true`,
and the manifest's `access.withheld_sources` naming it."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession

from tests.chat_helpers import parse_sse, stream_chat
from tests.collections.world import (
    QUESTION,
    SECRET,
    SECRET_TITLE,
    World,
    make_world,
    new_session,
    secret_rows,
)

pytestmark = pytest.mark.committed

SECRET_WORDS = SECRET[0][:40]


def _leaks(value: Any) -> bool:
    """Whether the board document's title or text is anywhere in `value`."""
    text = json.dumps(value)
    return SECRET_TITLE in text or SECRET_WORDS in text


def _assert_withheld(sources: list[dict[str, Any]], manifest: dict[str, Any], world: World) -> None:
    hidden = [s for s in sources if s["source_id"] == str(world.secret.id)]
    assert hidden, sources  # the source is still listed, as the turns listing lists it
    assert all(s.get("withheld") is True for s in hidden), hidden
    assert all("title" not in s and "snippet" not in s for s in hidden), hidden
    assert not _leaks(sources), sources
    assert not _leaks(manifest.get("sources")), manifest.get("sources")
    withheld = [s["n"] for s in manifest["sources"] if s.get("withheld")]
    assert withheld and manifest["access"]["withheld_sources"] == withheld
    # What the user may still see is shown as it was.
    kept = [s for s in sources if s["source_id"] != str(world.secret.id)]
    assert all("title" in s and "withheld" not in s for s in kept), kept


async def _remove_member(client: httpx.AsyncClient, world: World) -> None:
    member, admin = world.callers["member"], world.callers["admin"]
    removed = await client.delete(
        f"/admin/groups/{world.group_id}/members/{member.user.id}", headers=admin.headers
    )
    assert removed.status_code == 204, removed.text


async def test_a_retried_chat_withholds_the_document_its_user_lost(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    world = await make_world(client, db)
    member = world.callers["member"]
    body = {"session_id": await new_session(client, member), "message": QUESTION}
    headers = {**member.headers, "Idempotency-Key": "lost-access-chat"}
    first = await client.post("/chat", json=body, headers=headers)
    assert first.status_code == 200, first.text
    assert secret_rows(first.json()["sources"], world, "source_id") >= 1
    assert SECRET_TITLE in json.dumps(first.json()["sources"])
    same = await client.post("/chat", json=body, headers=headers)
    assert same.json() == first.json()  # nothing lost yet: the replay is the answer as given

    await _remove_member(client, world)
    replay = await client.post("/chat", json=body, headers=headers)
    assert replay.status_code == 200, replay.text
    replayed = replay.json()
    assert replayed["turn_id"] == first.json()["turn_id"]  # a replay, not a new turn
    assert replayed["answer"] == first.json()["answer"]
    _assert_withheld(replayed["sources"], replayed["context_metadata"], world)


async def test_a_retried_stream_withholds_the_document_its_user_lost(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    world = await make_world(client, db)
    member = world.callers["member"]
    body = {"session_id": await new_session(client, member), "message": QUESTION}
    headers = {**member.headers, "Idempotency-Key": "lost-access-stream"}
    response, events, _ = await stream_chat(client, headers, body)
    assert response.status_code == 200
    (sent,) = [e for e in events if e.name == "sources"]
    assert SECRET_TITLE in json.dumps(sent.data)

    await _remove_member(client, world)
    again, replayed, _ = await stream_chat(client, headers, body)
    assert again.status_code == 200
    (sources,) = [e for e in replayed if e.name == "sources"]
    (done,) = [e for e in replayed if e.name == "done"]
    assert done.data["turn_id"] == response.headers["X-Turn-Id"]
    _assert_withheld(sources.data["sources"], done.data["context_metadata"], world)
    if "sources" in done.data:  # a stored answer's `done` carries its sources too
        _assert_withheld(done.data["sources"], done.data["context_metadata"], world)


async def test_a_retried_stream_from_the_stored_answer_withholds_it_too(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    """The first stream's buffer gone (expired, evicted): the retry replays the record."""
    world = await make_world(client, db)
    member = world.callers["member"]
    body = {"session_id": await new_session(client, member), "message": QUESTION}
    headers = {**member.headers, "Idempotency-Key": "lost-access-stored"}
    response, _events, _ = await stream_chat(client, headers, body)
    assert response.status_code == 200
    redis = app.state.resources.redis
    turn_id = response.headers["X-Turn-Id"]
    gone = await redis.client.delete(
        redis.key("stream", turn_id, "events"), redis.key("stream", turn_id, "owner")
    )
    assert gone >= 1  # the buffer was there: the other test's retry follows it

    await _remove_member(client, world)
    again, replayed, _ = await stream_chat(client, headers, body)
    assert again.status_code == 200
    (sources,) = [e for e in replayed if e.name == "sources"]
    (done,) = [e for e in replayed if e.name == "done"]
    _assert_withheld(sources.data["sources"], done.data["context_metadata"], world)
    _assert_withheld(done.data["sources"], done.data["context_metadata"], world)


async def test_a_retried_completion_withholds_the_document_its_user_lost(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    world = await make_world(client, db)
    member = world.callers["member"]
    body = {"model": "threadline", "messages": [{"role": "user", "content": QUESTION}]}
    headers = {**member.headers, "Idempotency-Key": "lost-access-v1"}
    first = await client.post("/v1/chat/completions", json=body, headers=headers)
    assert first.status_code == 200, first.text
    assert SECRET_TITLE in json.dumps(first.json()["threadline"]["sources"])

    await _remove_member(client, world)
    replay = await client.post("/v1/chat/completions", json=body, headers=headers)
    assert replay.status_code == 200, replay.text
    extension = replay.json()["threadline"]
    assert extension["turn_id"] == first.json()["threadline"]["turn_id"]
    hidden = [s for s in extension["sources"] if s["source_id"] == str(world.secret.id)]
    assert hidden and all(s.get("withheld") is True for s in hidden)
    assert not _leaks(extension["sources"])


async def _resumed(
    client: httpx.AsyncClient, headers: dict[str, str], turn_id: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """`GET /chat/{turn}/stream` from the start: its `sources` and `done` events' data."""
    response = await client.get(
        f"/chat/{turn_id}/stream", headers={**headers, "Last-Event-ID": "0"}
    )
    assert response.status_code == 200, response.text
    events, _ = parse_sse(response.text)
    (sources,) = [e for e in events if e.name == "sources"]
    (done,) = [e for e in events if e.name == "done"]
    return sources.data, done.data


@pytest.mark.parametrize("buffer", ["kept", "gone"])
async def test_a_resumed_stream_withholds_the_document_its_user_lost(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, buffer: str
) -> None:
    """Resuming (not retrying) a finished turn's stream, from its Redis buffer or, once that
    is gone, from its row: the sources are what the user may see now."""
    world = await make_world(client, db)
    member = world.callers["member"]
    body = {"session_id": await new_session(client, member), "message": QUESTION}
    response, _events, _ = await stream_chat(client, member.headers, body)
    assert response.status_code == 200
    turn_id = response.headers["X-Turn-Id"]
    sources, _done = await _resumed(client, member.headers, turn_id)
    assert SECRET_TITLE in json.dumps(sources)  # before: shown as given
    if buffer == "gone":
        redis = app.state.resources.redis
        gone = await redis.client.delete(
            redis.key("stream", turn_id, "events"), redis.key("stream", turn_id, "owner")
        )
        assert gone >= 1

    await _remove_member(client, world)
    sources, done = await _resumed(client, member.headers, turn_id)
    _assert_withheld(sources["sources"], done["context_metadata"], world)
    if "sources" in done:  # a stored answer's `done` carries its sources too
        _assert_withheld(done["sources"], done["context_metadata"], world)
