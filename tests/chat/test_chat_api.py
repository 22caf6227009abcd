"""POST /chat and /chat/stream end to end: real PostgreSQL, Redis and checkpointer; the model
is the only fake."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from fastapi import FastAPI
from langchain_core.messages import BaseMessage
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.core.db import scope_to_tenant
from app.models import QueryHistory
from tests.chat_helpers import add_kb_document, ask, owner_connection, stream_chat, use_model
from tests.factories import login, make_chatter, make_session, make_tenant, make_user
from tests.fakes import ScriptedChatModel, text_of

pytestmark = pytest.mark.committed

CONTEXT_KEYS = {
    "query_composition",
    "composition_confidence",
    "token_budget",
    "token_count",
    "truncation_applied",
    "source_distribution",
    "quality_score",
    "sources",
    "history_turns_included",
    "reformulated_query",
    "active_attachment_ids",
}
USER_Q = {"role": "user", "content": "q"}


REFUNDS = [
    "Damaged goods can be returned within 30 days of delivery for a full refund.",
    "Electronics have a 14 day refund window and must be unopened.",
]


async def _stored_turns(db: AsyncSession, tenant_id: uuid.UUID) -> list[QueryHistory]:
    await scope_to_tenant(db, tenant_id)
    rows = await db.execute(select(QueryHistory).order_by(QueryHistory.created_at))
    await db.commit()
    return list(rows.scalars())


async def test_the_offline_responder_answers_from_the_knowledge_base_with_citations(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    user = await make_user(db, tenant)
    await add_kb_document(db, tenant, "Returns policy", REFUNDS)
    chat = await make_session(db, user)
    owner = await login(client, user)

    response = await client.post(
        "/chat",
        json={
            "session_id": str(chat.id),
            "message": "How long is the refund window for damaged goods?",
        },
        headers=owner.headers,
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["answer"].startswith("Extractive answer")
    assert "30 days" in body["answer"]
    assert "[1]" in body["answer"]
    assert body["query_composition"] == "pure_kb"
    assert body["sources"][0]["kind"] == "kb"
    assert body["sources"][0]["title"] == "Returns policy"
    assert body["sources"][0]["cited"] is True
    assert body["context_metadata"].keys() >= CONTEXT_KEYS
    assert body["usage"]["completion_tokens"] > 0
    assert body["model"] == "extractive"

    (turn,) = await _stored_turns(db, tenant.id)
    assert turn.status == "complete"
    assert str(turn.id) == body["turn_id"]
    assert turn.query_composition == "pure_kb"
    assert turn.context_metadata.keys() >= CONTEXT_KEYS
    assert turn.latency_ms is not None


async def test_with_nothing_to_retrieve_the_composition_is_chat(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    _, _user, chat, owner = await make_chatter(client, db)
    response = await ask(client, owner, chat, "What is our travel policy?")
    body = response.json()
    assert body["query_composition"] == "chat"
    assert body["sources"] == []
    assert "found nothing" in body["answer"]


def _history_aware(messages: list[BaseMessage]) -> str:
    if text_of(messages).startswith("Rewrite"):
        return "refund window for electronics"
    question = str(messages[-1].content).rsplit("Question:", 1)[-1]
    return "Electronics: 14 days [1]." if "electronics" in question else "30 days [1]."


async def test_a_client_sending_only_its_newest_message_gets_the_earlier_turns(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    user = await make_user(db, tenant)
    await add_kb_document(db, tenant, "Returns policy", REFUNDS)
    chat = await make_session(db, user)
    owner = await login(client, user)
    model = ScriptedChatModel(reply=_history_aware)
    use_model(app, model)

    first = await ask(client, owner, chat, "What is the refund window for damaged goods?")
    assert first.status_code == 200
    second = await ask(client, owner, chat, "and for electronics?")
    assert second.status_code == 200
    metadata = second.json()["context_metadata"]
    assert metadata["history_turns_included"] == 1
    assert metadata["is_follow_up"] is True
    assert metadata["reformulated_query"] == "refund window for electronics"
    prompt = text_of(model.answer_prompts()[-1])
    assert "What is the refund window for damaged goods?" in prompt  # the earlier turn
    assert "30 days [1]." in prompt  # and its answer


async def test_history_survives_a_restart_with_an_empty_cache(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, settings: object
) -> None:
    from app.main import create_app

    _tenant, _user, chat, owner = await make_chatter(client, db)
    first = await ask(client, owner, chat, "My project is called Bluebird.")
    assert first.status_code == 200

    # A new process: a fresh app (fresh lifespan, fresh pools) and Redis emptied.
    redis = app.state.resources.redis
    await redis.client.delete(*[k async for k in redis.client.scan_iter(match=f"{redis.prefix}*")])
    restarted = create_app(app.state.settings)
    async with restarted.router.lifespan_context(restarted):
        model = ScriptedChatModel(reply=lambda _: "It is called Bluebird.")
        use_model(restarted, model)
        transport = httpx.ASGITransport(app=restarted)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as fresh:
            again = await fresh.post(
                "/chat",
                json={"session_id": str(chat.id), "message": "What is my project called?"},
                headers=owner.headers,
            )
    assert again.status_code == 200, again.text
    assert again.json()["context_metadata"]["history_source"] == "database"
    assert "My project is called Bluebird." in text_of(model.answer_prompts()[-1])


async def test_client_history_and_stored_history_merge_without_duplicates(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    _, _user, chat, owner = await make_chatter(client, db)
    model = ScriptedChatModel(reply=lambda _: "Noted.")
    use_model(app, model)
    await ask(client, owner, chat, "Remember the code word: kestrel.")
    response = await client.post(
        "/chat",
        json={
            "session_id": str(chat.id),
            "messages": [
                {"role": "user", "content": "Remember the code word: kestrel."},
                {"role": "assistant", "content": "Noted."},
                {"role": "user", "content": "Also remember: osprey."},
                {"role": "assistant", "content": "Noted too."},
                {"role": "user", "content": "Which words did I give you?"},
            ],
        },
        headers=owner.headers,
    )
    assert response.status_code == 200
    prompt = text_of(model.answer_prompts()[-1])
    assert prompt.count("Remember the code word: kestrel.") == 1
    assert "Also remember: osprey." in prompt


async def test_the_checkpoint_is_written_under_the_session_id(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant, _user, chat, owner = await make_chatter(client, db)
    # A real question: a greeting is answered by triage, and the model path's checkpoint is
    # the one this test is about.
    body = (await ask(client, owner, chat, "What does the travel policy say about taxis?")).json()
    assert body["triage"]["route"] in ("llm", "tools")
    threads: list[str] = []
    for _ in range(50):  # the checkpoint is written just after the answer is returned
        await scope_to_tenant(db, tenant.id)
        query = text("SELECT DISTINCT thread_id FROM checkpoints")
        threads = list((await db.execute(query)).scalars())
        await db.commit()
        if threads:
            break
        await asyncio.sleep(0.05)
    assert threads == [str(chat.id)]


async def test_a_foreign_or_unknown_session_is_404_on_both_endpoints(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    owner_user = await make_user(db, tenant)
    chat = await make_session(db, owner_user)
    strangers = [
        await login(client, await make_user(db, tenant)),
        await login(client, await make_user(db, await make_tenant(db))),
    ]
    for stranger in strangers:
        for session_id in (chat.id, uuid.uuid4()):
            body = {"session_id": str(session_id), "message": "hi"}
            for path in ("/chat", "/chat/stream"):
                response = await client.post(path, json=body, headers=stranger.headers)
                assert response.status_code == 404, path
                assert response.json()["error"]["code"] == "session_not_found"
    assert await _stored_turns(db, tenant.id) == []


async def test_malformed_chat_bodies_are_json_errors(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    _, _user, chat, owner = await make_chatter(client, db)
    sid = str(chat.id)
    cases = [
        ({"session_id": sid, "message": ""}, 422),
        ({"session_id": sid, "message": "   "}, 422),
        ({"session_id": sid}, 422),
        ({"session_id": sid, "message": "a", "messages": [{"role": "user", "content": "a"}]}, 422),
        ({"session_id": sid, "messages": []}, 422),
        ({"session_id": sid, "messages": [USER_Q, {"role": "assistant", "content": "a"}]}, 422),
        ({"session_id": sid, "message": "x" * 40_000}, 422),
        ({"session_id": "nope", "message": "hi"}, 422),
    ]
    for body, status in cases:
        for path in ("/chat", "/chat/stream"):
            response = await client.post(path, json=body, headers=owner.headers)
            assert response.status_code == status, (path, body)
            assert response.json()["error"]["code"] == "validation_error"
    huge = await client.post(
        "/chat", json={"session_id": sid, "message": "x" * 1_100_000}, headers=owner.headers
    )
    assert huge.status_code == 413
    assert huge.json()["error"]["code"] == "payload_too_large"


async def test_pii_is_anonymised_in_what_is_stored(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant, _user, chat, owner = await make_chatter(client, db)
    use_model(app, ScriptedChatModel(reply=lambda _: "I will write to mario.rossi@example.com."))
    response = await ask(
        client, owner, chat, "My card is 4111 1111 1111 1111, mail mario.rossi@example.com"
    )
    assert "mario.rossi@example.com" in response.json()["answer"]  # the user sees their answer
    (turn,) = await _stored_turns(db, tenant.id)
    assert turn.user_query == "My card is [CARD], mail [EMAIL]"
    assert turn.answer == "I will write to [EMAIL]."


async def test_citations_that_point_at_nothing_are_removed_and_counted(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    user = await make_user(db, tenant)
    await add_kb_document(db, tenant, "Returns policy", REFUNDS)
    chat = await make_session(db, user)
    owner = await login(client, user)
    use_model(app, ScriptedChatModel(reply=lambda _: "Thirty days [1][7]. Also [9]."))
    response = await ask(client, owner, chat, "refund window for damaged goods")
    body = response.json()
    assert body["answer"] == "Thirty days [1]. Also."
    assert body["context_metadata"]["citations"] == {"cited": [1], "removed_invalid": 2}


async def test_deleting_a_session_drops_its_history_cache_and_checkpoints(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, settings: Settings
) -> None:
    tenant, _user, chat, owner = await make_chatter(client, db)
    await ask(client, owner, chat, "hello")
    history = app.state.resources.history
    assert await history.redis.client.exists(history.key(tenant.id, chat.id))
    count = text("SELECT count(*) FROM checkpoints WHERE thread_id = :t")
    for _ in range(50):  # the checkpoint is written just after the answer
        async with owner_connection(settings) as probe:
            if await probe.scalar(count, {"t": str(chat.id)}):
                break
        await asyncio.sleep(0.05)
    assert (await client.delete(f"/sessions/{chat.id}", headers=owner.headers)).status_code == 204
    assert not await history.redis.client.exists(history.key(tenant.id, chat.id))
    # Counted as the owner, past RLS: no row of the thread may be left anywhere.
    async with owner_connection(settings) as probe:
        for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
            left = await probe.scalar(
                text(f"SELECT count(*) FROM {table} WHERE thread_id = :t"), {"t": str(chat.id)}
            )
            assert left == 0, table


async def test_chat_asks_for_the_whole_answer_and_the_stream_streams_it(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    """Nobody watches a `/chat` answer arrive: one call to the provider, same answer and
    usage; `/chat/stream` streams the provider's tokens."""
    _tenant, _user, chat, owner = await make_chatter(client, db)
    model = ScriptedChatModel(reply=lambda _m: "Taxis are refunded up to 40 euros a ride.")
    use_model(app, model)
    question = "What does the travel policy say about taxis?"
    answered = (await ask(client, owner, chat, question)).json()
    assert (model.whole_answers, model.tokens_streamed) == (1, 0)
    assert answered["answer"] == "Taxis are refunded up to 40 euros a ride."
    assert answered["usage"]["completion_tokens"] > 0
    body = {"session_id": str(chat.id), "message": question}
    _, events, _ = await stream_chat(client, owner.headers, body)
    tokens = [e.data["text"] for e in events if e.name == "token"]
    assert model.whole_answers == 1 and len(tokens) == model.tokens_streamed > 1
    assert "".join(tokens).strip() == events[-1].data["answer"] == answered["answer"]
    streamed_usage = events[-1].data["usage"]  # its prompt also holds the first turn
    assert streamed_usage["completion_tokens"] == answered["usage"]["completion_tokens"]


async def test_a_checkpoint_write_failing_after_the_turn_is_stored_does_not_fail_it(
    app: FastAPI,
    client: httpx.AsyncClient,
    db: AsyncSession,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The checkpoint is written after persist committed the turn: when that write fails,
    the answer stands — as JSON and as a stream's `done` — and the turn stays complete."""
    tenant, _user, chat, owner = await make_chatter(client, db)
    use_model(app, ScriptedChatModel(reply=lambda _m: "Taxis are refunded."))
    saver = app.state.resources.runner.graph.checkpointer

    async def unavailable(*_args: object, **_kwargs: object) -> None:
        raise ConnectionError("the checkpoint database went away")

    monkeypatch.setattr(saver, "aput", unavailable)
    question = "What does the travel policy say about taxis?"
    answered = await ask(client, owner, chat, question)
    assert answered.status_code == 200, answered.text
    assert answered.json()["answer"] == "Taxis are refunded."
    body = {"session_id": str(chat.id), "message": question}
    _, events, _ = await stream_chat(client, owner.headers, body)
    assert [e.name for e in events][-1] == "done"
    assert events[-1].data["answer"] == "Taxis are refunded."
    turns = await _stored_turns(db, tenant.id)
    assert [t.status for t in turns] == ["complete", "complete"]


async def test_the_answer_does_not_wait_for_the_checkpoint_write(
    app: FastAPI,
    client: httpx.AsyncClient,
    db: AsyncSession,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The turn is stored by persist; the graph's checkpoint write after it is off the
    answer's path, for `/chat` (no token stream) as for `/chat/stream`."""
    _tenant, _user, chat, owner = await make_chatter(client, db)
    use_model(app, ScriptedChatModel(reply=lambda _m: "Taxis are refunded."))
    saver = app.state.resources.runner.graph.checkpointer
    write = saver.aput

    async def slow_write(*args: object, **kwargs: object) -> object:
        await asyncio.sleep(1.0)
        return await write(*args, **kwargs)

    monkeypatch.setattr(saver, "aput", slow_write)
    answered = await ask(client, owner, chat, "What does the travel policy say about taxis?")
    assert answered.status_code == 200
    count = text("SELECT count(*) FROM checkpoints WHERE thread_id = :t")
    async with owner_connection(settings) as probe:
        assert await probe.scalar(count, {"t": str(chat.id)}) == 0  # still being written
    for _ in range(60):
        async with owner_connection(settings) as probe:
            if await probe.scalar(count, {"t": str(chat.id)}) == 1:
                return
        await asyncio.sleep(0.05)
    raise AssertionError("the checkpoint was not written after the answer")
