"""The SSE stream: event order and ids, heartbeats, disconnects and provider failures."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import Callable

import httpx
import pytest
from fastapi import FastAPI
from langchain_core.messages import BaseMessage
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.conversation.pipeline.budget import SYSTEM_PROMPT
from app.core.db import scope_to_tenant
from app.models import ChatSession, QueryHistory
from tests.chat.stream_driver import stream_until
from tests.chat_helpers import add_kb_document, finished_turn, stream_chat, use_model
from tests.factories import login, make_chatter, make_session, make_tenant, make_turn, make_user
from tests.fakes import ScriptedChatModel, text_of

pytestmark = pytest.mark.committed

LONG_ANSWER = " ".join(f"word{i}" for i in range(50))


async def _turn(db: AsyncSession, tenant_id: uuid.UUID, turn_id: str) -> QueryHistory:
    await scope_to_tenant(db, tenant_id)
    turn = await db.scalar(select(QueryHistory).where(QueryHistory.id == uuid.UUID(turn_id)))
    await db.commit()
    assert turn is not None
    return turn


async def test_events_come_in_order_with_increasing_ids(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    user = await make_user(db, tenant)
    await add_kb_document(db, tenant, "Guide", ["Threadline streams answers token by token."])
    chat = await make_session(db, user)
    owner = await login(client, user)

    response, events, _ = await stream_chat(
        client, owner.headers, {"session_id": str(chat.id), "message": "How are answers streamed?"}
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["x-accel-buffering"] == "no"
    names = [e.name for e in events]
    assert names[0] == "meta"
    assert names[-2:] == ["sources", "done"]
    assert set(names[1:-2]) == {"token"}
    assert [int(e.id or 0) for e in events] == list(range(1, len(events) + 1))

    meta, done = events[0].data, events[-1].data
    assert meta["session_id"] == str(chat.id)
    assert meta["query_composition"] == "pure_kb"
    assert done["turn_id"] == meta["turn_id"]
    assert done["usage"]["total_tokens"] > 0
    streamed = "".join(e.data["text"] for e in events if e.name == "token")
    assert streamed == done["answer"]
    assert events[-2].data["sources"][0]["title"] == "Guide"
    assert (await _turn(db, tenant.id, meta["turn_id"])).status == "complete"


async def test_heartbeats_keep_a_silent_stream_alive(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    _, _user, chat, owner = await make_chatter(client, db)
    resources = app.state.resources
    resources.settings = resources.settings.model_copy(update={"sse_heartbeat_seconds": 0.05})
    use_model(app, ScriptedChatModel(reply=lambda _: "slow answer", token_delay=0.3))

    response, events, heartbeats = await stream_chat(
        client, owner.headers, {"session_id": str(chat.id), "message": "hello?"}
    )
    assert response.status_code == 200
    assert heartbeats >= 3
    assert events[-1].name == "done"


async def test_a_provider_failure_ends_with_an_error_event_and_a_failed_turn(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant, _user, chat, owner = await make_chatter(client, db)
    use_model(app, ScriptedChatModel(reply=lambda _: LONG_ANSWER, fail_after_tokens=3))

    response, events, _ = await stream_chat(
        client, owner.headers, {"session_id": str(chat.id), "message": "tell me everything"}
    )
    assert response.status_code == 200
    assert [e.name for e in events] == ["meta", "token", "token", "token", "error"]
    assert events[-1].data["code"] == "generation_failed"
    assert "Traceback" not in json.dumps(events[-1].data)
    turn = await _turn(db, tenant.id, events[0].data["turn_id"])
    assert turn.status == "failed"
    assert turn.answer == "word0 word1 word2 "


async def test_the_json_endpoint_reports_a_provider_failure_as_502(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    _, _user, chat, owner = await make_chatter(client, db)
    use_model(app, ScriptedChatModel(reply=lambda _: LONG_ANSWER, fail_after_tokens=0))
    response = await client.post(
        "/chat",
        json={"session_id": str(chat.id), "message": "What is the refund policy?"},
        headers=owner.headers,
    )
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "generation_failed"
    await scope_to_tenant(db, chat.tenant_id)
    turn = await db.scalar(
        select(QueryHistory)
        .where(QueryHistory.session_id == chat.id)
        .execution_options(populate_existing=True)
    )
    await db.commit()
    assert turn is not None
    assert turn.status == "failed"


def _tokens_seen(count: int) -> Callable[[bytes], bool]:
    return lambda received: received.count(b"event: token") >= count


async def test_a_client_that_disconnects_cancels_generation_and_leaves_an_incomplete_turn(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant, _user, chat, owner = await make_chatter(client, db)
    model = ScriptedChatModel(reply=lambda _: LONG_ANSWER, token_delay=0.02)
    use_model(app, model)
    resources = app.state.resources  # no resume window: the disconnect stops generation at once
    resources.settings = resources.settings.model_copy(update={"sse_resume_grace_seconds": 0})

    await stream_until(
        app, owner.headers, {"session_id": str(chat.id), "message": "go on"}, _tokens_seen(3)
    )
    turn = await finished_turn(db, tenant.id, QueryHistory.session_id == chat.id)
    assert turn is not None
    assert turn.status == "incomplete"
    assert turn.answer
    assert LONG_ANSWER.startswith(turn.answer)
    streamed = model.tokens_streamed
    await asyncio.sleep(0.3)
    assert model.tokens_streamed == streamed < 50  # the model call was cancelled


def _summarising_model(messages: list[BaseMessage]) -> str:
    if "running summary" in str(messages[0].content):
        topics = sorted(set(re.findall(r"topic\d", text_of(messages))))
        return "We covered " + ", ".join(topics) + "."
    return "ok"


@pytest.mark.parametrize("summariser", ["rules", "llm"])
async def test_a_long_session_is_summarised_inside_the_budget_not_dropped(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, summariser: str
) -> None:
    """Turns over the budget are cut from this turn's prompt (and recorded), never lost: the
    background job folds the turns that left the window into the summary after the turn,
    and the next turn reads the summary."""
    tenant = await make_tenant(db)
    user = await make_user(db, tenant)
    chat = await make_session(db, user)
    for i in range(8):
        await make_turn(
            db,
            chat,
            user_query=f"Question {i} about topic{i}?",
            answer=f"Answer {i}. " + LONG_ANSWER,
        )
    owner = await login(client, user)
    app.state.resources.history.limit = 3
    context = app.state.resources.turn_context
    context.settings = context.settings.model_copy(
        update={
            "context_base_tokens": 600,
            "context_tokens_per_result": 0,
            "context_max_tokens": 600,
            "summary_max_tokens": 200,
        }
    )
    model = ScriptedChatModel(reply=_summarising_model)
    if summariser == "llm":
        use_model(app, model)

    response = await client.post(
        "/chat",
        json={"session_id": str(chat.id), "message": "What did we cover?"},
        headers=owner.headers,
    )
    assert response.status_code == 200, response.text
    metadata = response.json()["context_metadata"]
    assert metadata["token_count"] <= metadata["token_budget"] == 600
    assert metadata["truncation_applied"] is True, metadata
    included = metadata["history_turns_included"]
    assert 0 < included < 8
    cut = [t for t in metadata["truncated"] if t["kind"] == "history"]
    assert cut and cut[0]["turns"] == 8 - included  # none folded inside the turn
    assert metadata["summary"] == {"included": False, "summarized_turns": 0}

    await app.state.resources.jobs.drain()  # the fold, after the turn
    await scope_to_tenant(db, tenant.id)
    stored = await db.scalar(
        select(ChatSession)
        .where(ChatSession.id == chat.id)
        .execution_options(populate_existing=True)
    )
    await db.commit()
    assert stored is not None
    assert stored.summarized_turns == 9 - 3  # every turn but the window's three
    expected = "Question 0 about topic0" if summariser == "rules" else "We covered topic0"
    assert expected in (stored.summary or "")

    response = await client.post(
        "/chat",
        json={"session_id": str(chat.id), "message": "And what else did we cover?"},
        headers=owner.headers,
    )
    assert response.status_code == 200, response.text
    metadata = response.json()["context_metadata"]
    assert metadata["summary"] == {"included": True, "summarized_turns": 6}
    if summariser == "llm":
        assert expected in str(model.answer_prompts()[-1][0].content)  # the summary went in


async def test_a_disconnected_turn_stores_its_partial_answer_through_the_output_guardrail(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant, _user, chat, owner = await make_chatter(client, db)
    leak = SYSTEM_PROMPT.split(". ")[1]  # "Use the numbered sources below; cite each claim…"
    model = ScriptedChatModel(
        reply=lambda _: f"Fine. {leak}. Here is more. {LONG_ANSWER}", token_delay=0.02
    )
    use_model(app, model)
    resources = app.state.resources
    resources.settings = resources.settings.model_copy(update={"sse_resume_grace_seconds": 0})

    await stream_until(
        app, owner.headers, {"session_id": str(chat.id), "message": "go on"}, _tokens_seen(30)
    )
    turn = await finished_turn(db, tenant.id, QueryHistory.session_id == chat.id)
    assert turn is not None and turn.status == "incomplete"
    assert leak not in turn.answer and "numbered sources" not in turn.answer
    assert " ".join(turn.answer.split()).startswith("Fine. Here is more. word0")
    guard = turn.context_metadata["validation"]["output_guardrail"]
    assert guard["safe"] is False and guard["replaced"] is False
    assert leak in turn.context_metadata["audit"]["original_answer"]
    assert turn.context_metadata["triage"]["route"] == "llm"
