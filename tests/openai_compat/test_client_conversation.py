"""A client's conversation id (`X-OpenWebUI-Chat-Id`, `X-Conversation-Id`) as the session of
its messages, against the running API: an Open WebUI chat is one Threadline session, scoped to
the caller's tenant and user; a named session wins; a bad id is refused storing nothing; a
deleted session's chat starts afresh with nothing of the deleted one."""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

from app.core.database_urls import resolve_database_urls
from app.models import Tenant
from tests.factories import DEFAULT_PASSWORD, make_user
from tests.openai_compat.world import World

QUESTIONS = ["How long do refunds take?", "Are shipping costs refunded?", "Which plans?"]


@dataclass
class Reply:
    status: int
    session: str | None
    text: str
    extension: dict[str, Any]
    body: Any


def bearer(credential: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {credential}"}


async def open_webui_turn(
    world: World,
    credential: str,
    conversation: list[dict[str, str]],
    headers: dict[str, Any],
    *,
    stream: bool = True,
) -> Reply:
    """One message as Open WebUI sends it: streamed, the whole conversation resent with its
    system prompt, sampling parameters, and the forwarded user-info headers."""
    body = {
        "model": "threadline",
        "stream": stream,
        "temperature": 0.8,
        "messages": [{"role": "system", "content": "You are helpful."}, *conversation],
    }
    sent = {
        **bearer(credential),
        "X-OpenWebUI-User-Name": "Web User",
        "X-OpenWebUI-User-Role": "user",
        **headers,
    }
    async with httpx.AsyncClient(base_url=world.url, timeout=60) as client:
        response = await client.post("/v1/chat/completions", json=body, headers=sent)
    session = response.headers.get("X-Threadline-Session")
    if response.status_code != 200:
        return Reply(response.status_code, session, "", {}, response.json())
    if not stream:
        found = response.json()
        text = found["choices"][0]["message"]["content"]
        return Reply(200, session, text, found["threadline"], found)
    frames = [f[6:] for f in response.text.split("\n\n") if f.startswith("data: ")]
    assert frames[-1] == "[DONE]", response.text
    chunks = [json.loads(f) for f in frames[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    return Reply(200, session, text, chunks[-1]["threadline"], chunks)


async def chat(
    world: World, credential: str, chat_id: str, questions: list[str], **headers: str
) -> list[Reply]:
    """A whole Open WebUI chat: each question sent with the conversation so far."""
    conversation: list[dict[str, str]] = []
    replies = []
    for question in questions:
        conversation.append({"role": "user", "content": question})
        reply = await open_webui_turn(
            world, credential, conversation, {"X-OpenWebUI-Chat-Id": chat_id, **headers}
        )
        assert reply.status == 200, reply.body
        replies.append(reply)
        conversation.append({"role": "assistant", "content": reply.text})
    return replies


async def session_turns(world: World, session: str) -> int:
    return await world.count(
        "SELECT count(*) FROM query_history WHERE session_id = :s", s=uuid.UUID(session)
    )


THREAD_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")


async def move_thread(world: World, source: str, target: str) -> None:
    """Move a LangGraph thread's rows to another thread id, as the database owner."""
    engine = create_async_engine(resolve_database_urls(world.settings).owner)
    try:
        async with engine.begin() as connection:
            for table in THREAD_TABLES:
                await connection.execute(
                    text(f"UPDATE {table} SET thread_id = :target WHERE thread_id = :source"),
                    {"source": source, "target": target},
                )
    finally:
        await engine.dispose()


async def checkpoint_ids(world: World, thread: str) -> set[str]:
    """The ids of a thread's checkpoints, as the database owner."""
    engine = create_async_engine(resolve_database_urls(world.settings).owner)
    try:
        async with engine.connect() as connection:
            rows = await connection.execute(
                text("SELECT checkpoint_id FROM checkpoints WHERE thread_id = :t"), {"t": thread}
            )
            return {str(row[0]) for row in rows}
    finally:
        await engine.dispose()


async def new_user_token(world: World, role: str = "member") -> tuple[uuid.UUID, str]:
    """A new user of tenant a, signed in: their id and access token."""
    engine = create_async_engine(resolve_database_urls(world.settings).app)
    async with AsyncSession(engine, expire_on_commit=False) as db:
        user = await make_user(db, Tenant(id=world.a.tenant_id, name="a"), role=role)
    await engine.dispose()
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
        login = await client.post(
            "/auth/token", json={"email": user.email, "password": DEFAULT_PASSWORD}
        )
    assert login.status_code == 200, login.text
    return user.id, str(login.json()["access_token"])


@pytest.fixture(scope="module")
async def key(world: World) -> str:
    """A member API key of a user of tenant a of this module's own, as Open WebUI is given: the
    module's turns count against that user's rate limit, not the package's shared admin's."""
    _, token = await new_user_token(world, role="admin")
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
        created = await client.post(
            "/admin/api-keys", json={"name": "open-webui", "role": "member"}, headers=bearer(token)
        )
    assert created.status_code == 201, created.text
    return str(created.json()["key"])


async def test_an_open_webui_chat_is_one_session_with_its_turns_once(
    world: World, key: str
) -> None:
    chat_id = str(uuid.uuid4())
    sessions = await world.sessions(world.a.tenant_id)

    replies = await chat(world, key, chat_id, QUESTIONS)

    session = replies[0].session
    assert session is not None
    assert [r.session for r in replies] == [session] * 3
    assert [r.extension["session_id"] for r in replies] == [session] * 3
    assert "14 days" in replies[0].text and "[1]" in replies[0].text
    assert await world.sessions(world.a.tenant_id) == sessions + 1
    assert await session_turns(world, session) == 3
    sid = uuid.UUID(session)
    distinct = await world.count(
        "SELECT count(DISTINCT user_query) FROM query_history WHERE session_id = :s", s=sid
    )
    assert distinct == 3
    # The third prompt held the two stored turns once each, not again as the client's.
    included = await world.count(
        "SELECT (context_metadata->>'history_turns_included')::int FROM query_history "
        "WHERE session_id = :s AND user_query = :q",
        s=sid,
        q=QUESTIONS[2],
    )
    assert included == 2
    # Titled from its first message, as every new session on /v1, and the caller's own.
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
        read = await client.get(f"/sessions/{session}", headers=bearer(key))
    assert read.status_code == 200 and read.json()["title"] == QUESTIONS[0]


async def test_two_chats_are_two_sessions_and_the_generic_header_works_alike(
    world: World,
    key: str,
) -> None:
    first = await chat(world, key, f"chat-{uuid.uuid4()}", QUESTIONS[:1])
    second = await chat(world, key, f"chat-{uuid.uuid4()}", QUESTIONS[:1])
    assert first[0].session != second[0].session

    conversation_id = f"conv-{uuid.uuid4()}"
    replies = []
    for question in QUESTIONS[:2]:
        reply = await open_webui_turn(
            world,
            key,
            [{"role": "user", "content": question}],
            {"X-Conversation-Id": conversation_id},
            stream=False,
        )
        assert reply.status == 200, reply.body
        replies.append(reply)
    assert replies[0].session == replies[1].session
    assert replies[0].session not in (first[0].session, second[0].session)
    assert await session_turns(world, replies[0].session or "") == 2
    # Both headers sent: Open WebUI's chat id is the one used.
    both = await open_webui_turn(
        world,
        key,
        [{"role": "user", "content": QUESTIONS[2]}],
        {"X-Conversation-Id": f"other-{uuid.uuid4()}", "X-OpenWebUI-Chat-Id": conversation_id},
    )
    assert both.status == 200 and both.session == replies[0].session
    assert await session_turns(world, replies[0].session or "") == 3


async def test_the_same_chat_id_from_another_user_or_tenant_is_another_session(
    world: World,
    key: str,
) -> None:
    chat_id = str(uuid.uuid4())
    mine = await chat(world, key, chat_id, QUESTIONS[:2])
    my_session = mine[0].session or ""
    other_user, token = await new_user_token(world)

    theirs = await chat(world, token, chat_id, ["Refunds, please?"])
    foreign = await chat(world, world.b.member_key, chat_id, ["Refunds at your company?"])

    their_session, foreign_session = theirs[0].session, foreign[0].session
    assert len({my_session, their_session, foreign_session}) == 3
    assert await session_turns(world, my_session) == 2  # nothing of theirs came in
    owned = await world.count(
        "SELECT count(*) FROM chat_sessions WHERE id = :s AND tenant_id = :t AND user_id = :u",
        s=uuid.UUID(their_session or ""),
        t=world.a.tenant_id,
        u=other_user,
    )
    assert owned == 1
    in_b = await world.count(
        "SELECT count(*) FROM chat_sessions WHERE id = :s AND tenant_id = :t",
        s=uuid.UUID(foreign_session or ""),
        t=world.b.tenant_id,
    )
    assert in_b == 1
    # Tenant b's answer is from tenant b's knowledge base, not a's.
    assert foreign[0].extension["sources"][0]["source_id"] == world.b.document_id
    # And the first user's session stays theirs: the other user cannot read it.
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
        read = await client.get(f"/sessions/{my_session}", headers=bearer(token))
    assert read.status_code == 404


@pytest.mark.parametrize(
    "headers",
    [
        {"X-OpenWebUI-Chat-Id": "x" * 201},
        {"X-Conversation-Id": "x" * 500},
        {"X-OpenWebUI-Chat-Id": "caf\xe9".encode("latin-1")},
        {"X-OpenWebUI-Chat-Id": ""},
        {"X-OpenWebUI-Chat-Id": "tab\tinside"},
        {"X-OpenWebUI-Chat-Id": "chat-1", "X-Conversation-Id": "x" * 201},
    ],
    ids=["too-long", "generic-too-long", "not-ascii", "empty", "control", "unused-but-bad"],
)
@pytest.mark.parametrize("stream", [True, False])
async def test_a_bad_conversation_id_is_refused_storing_nothing(
    world: World, key: str, headers: dict[str, Any], stream: bool
) -> None:
    turns, sessions = await world.turns(world.a.tenant_id), await world.sessions(world.a.tenant_id)

    reply = await open_webui_turn(
        world,
        key,
        [{"role": "user", "content": QUESTIONS[0]}],
        headers,
        stream=stream,
    )

    assert reply.status == 400
    error = reply.body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    assert error["code"] == "invalid_conversation_id"
    assert "X-" in error["message"]  # names the header
    assert await world.turns(world.a.tenant_id) == turns
    assert await world.sessions(world.a.tenant_id) == sessions


async def test_a_named_session_wins_over_the_chat_id(world: World, key: str) -> None:
    chat_id = str(uuid.uuid4())
    chat_session = (await chat(world, key, chat_id, QUESTIONS[:1]))[0].session
    plain = await open_webui_turn(world, key, [{"role": "user", "content": QUESTIONS[0]}], {})
    named = plain.session or ""
    assert named != chat_session

    by_header = await chat(world, key, chat_id, QUESTIONS[1:2], **{"X-Threadline-Session": named})
    assert by_header[0].session == named

    async with httpx.AsyncClient(base_url=world.url, timeout=60) as client:
        by_metadata = await client.post(
            "/v1/chat/completions",
            json={
                "model": "threadline",
                "messages": [{"role": "user", "content": QUESTIONS[2]}],
                "metadata": {"session_id": named},
            },
            headers={**bearer(key), "X-OpenWebUI-Chat-Id": chat_id},
        )
    assert by_metadata.status_code == 200, by_metadata.text
    assert by_metadata.headers["X-Threadline-Session"] == named
    assert await session_turns(world, named) == 3
    assert await session_turns(world, chat_session or "") == 1


async def test_a_deleted_chats_session_starts_afresh_with_nothing_of_the_old(
    world: World,
    key: str,
) -> None:
    chat_id = str(uuid.uuid4())
    first = await chat(world, key, chat_id, QUESTIONS[:2])
    session = first[0].session or ""
    old_turns = [uuid.UUID(r.extension["turn_id"]) for r in first]
    assert world.settings.redis_url is not None
    redis = Redis.from_url(world.settings.redis_url)
    try:
        # The session's cached history, as the server stored it after its turns.
        cached = [
            found
            async for found in redis.scan_iter(
                match=f"*history:{world.a.tenant_id}:{session}", count=1000
            )
        ]
        assert len(cached) == 1, cached
        old_checkpoints = await checkpoint_ids(world, session)
        assert old_checkpoints
        # Kept aside through the deletion, then put back: as a turn finishing while its
        # session was deleted leaves them (docs/adr/0031), until the retention sweep.
        hold = str(uuid.uuid4())
        await move_thread(world, session, hold)
        async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
            deleted = await client.delete(f"/sessions/{session}", headers=bearer(key))
        assert deleted.status_code == 204
        assert await redis.exists(cached[0]) == 0
        await move_thread(world, hold, session)
        # Such a late writer could put the deleted turns back into the cache too: the
        # reopened session must see none of it.
        stale = {
            "turns": [
                {
                    "turn_id": str(t),
                    "user_query": "THE DELETED QUESTION",
                    "answer": "old",
                    "status": "complete",
                }
                for t in old_turns
            ],
            "total": 50,
            "summary": "",
            "summarized_turns": 0,
        }
        await redis.set(cached[0], json.dumps(stale), ex=600)

        # Open WebUI's next message in that chat (it still has the chat).
        again = await open_webui_turn(
            world,
            key,
            [{"role": "user", "content": "Is shipping refunded at all?"}],
            {"X-OpenWebUI-Chat-Id": chat_id},
        )

        assert again.status == 200, again.body
        assert again.session == session  # the same derived id, opened afresh
        assert await session_turns(world, session) == 1
        gone = await world.count(
            "SELECT count(*) FROM query_history WHERE id = ANY(:ids)", ids=old_turns
        )
        assert gone == 0
        included = await world.count(
            "SELECT (context_metadata->>'history_turns_included')::int FROM query_history "
            "WHERE id = :t",
            t=uuid.UUID(again.extension["turn_id"]),
        )
        assert included == 0  # nothing of the deleted session in the prompt
        now = json.loads(await redis.get(cached[0]) or b"{}")
        assert now["total"] == 1 and "THE DELETED QUESTION" not in json.dumps(now)
        # The deleted session's checkpoints went when the id was opened again: the thread
        # holds the new turn's alone.
        now_checkpoints = await checkpoint_ids(world, session)
        assert now_checkpoints and not now_checkpoints & old_checkpoints
    finally:
        await redis.aclose()
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
        read = await client.get(f"/sessions/{session}", headers=bearer(key))
    assert read.status_code == 200
    assert read.json()["title"] == "Is shipping refunded at all?"


async def test_concurrent_first_messages_of_a_chat_open_one_session(world: World, key: str) -> None:
    chat_id = str(uuid.uuid4())
    sessions = await world.sessions(world.a.tenant_id)

    replies = await asyncio.gather(
        *(
            open_webui_turn(
                world,
                key,
                [{"role": "user", "content": question}],
                {"X-OpenWebUI-Chat-Id": chat_id},
            )
            for question in QUESTIONS
        )
    )

    assert [r.status for r in replies] == [200] * 3, [r.body for r in replies]
    assert len({r.session for r in replies}) == 1
    assert await world.sessions(world.a.tenant_id) == sessions + 1
    assert await session_turns(world, replies[0].session or "") == 3


async def test_an_idempotent_retry_in_a_chat_runs_once(world: World, key: str) -> None:
    chat_id = str(uuid.uuid4())
    headers = {"X-OpenWebUI-Chat-Id": chat_id, "Idempotency-Key": f"k-{uuid.uuid4()}"}
    conversation = [{"role": "user", "content": QUESTIONS[0]}]
    turns = await world.turns(world.a.tenant_id)

    first = await open_webui_turn(world, key, conversation, headers)
    retry = await open_webui_turn(world, key, conversation, headers)

    assert first.status == retry.status == 200, (first.body, retry.body)
    assert first.session == retry.session
    assert first.extension["turn_id"] == retry.extension["turn_id"]
    assert await world.turns(world.a.tenant_id) == turns + 1
