"""Follow-up retrieval through `/chat` (ADR 0034): real PostgreSQL, Redis and checkpointer;
the model is the only fake, at the provider boundary."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from langchain_core.messages import BaseMessage
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.llm.responder import ChatModelResponder
from app.main import create_app
from tests.chat_helpers import add_kb_document, ask, use_model
from tests.factories import Chatter, login, make_chatter, make_user
from tests.fakes import ScriptedChatModel, text_of

pytestmark = pytest.mark.committed

PASSPORT = "Renewing an adult passport online costs 88 pounds and needs a new digital photo."
LICENCE = "Renewing a photocard driving licence costs 14 pounds and is needed every ten years."
COUNCIL = "Full-time students are exempt from council tax; a household of students pays none."


async def _world(client: httpx.AsyncClient, db: AsyncSession) -> Chatter:
    chatter = await make_chatter(client, db)
    for title, text in (
        ("Passport renewal", PASSPORT),
        ("Driving licence renewal", LICENCE),
        ("Council tax for students", COUNCIL),
    ):
        await add_kb_document(db, chatter.tenant, title, [text])
    return chatter


def _titles(body: dict[str, Any]) -> list[str]:
    return [s["title"] for s in body["sources"]]


async def test_a_follow_up_searches_with_the_conversation_and_the_manifest_says_how(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    w = await _world(client, db)
    first = (await ask(client, w.owner, w.chat, "How do I renew my passport?")).json()
    assert _titles(first)[0] == "Passport renewal"
    assert first["context_metadata"]["retrieval"]["queries"] == [
        {"name": "question", "text": "How do I renew my passport?", "weight": 1.0}
    ]

    body = (await ask(client, w.owner, w.chat, "How much does it cost?")).json()

    metadata = body["context_metadata"]
    assert metadata["is_follow_up"] is True
    assert metadata["rewrite"] == {"by": "rules", "model": None}
    queries = {q["name"]: q for q in metadata["retrieval"]["queries"]}
    assert queries["question"]["weight"] == 1.0
    assert queries["history"]["text"] == "renew passport How much does it cost?"
    assert queries["history"]["weight"] == 1.0
    cited_chunk = first["sources"][0]["id"]
    assert queries["cited"]["chunks"] == [cited_chunk]
    assert queries["cited"]["weight"] > 0
    assert _titles(body)[0] == "Passport renewal"
    top = body["sources"][0]["id"]
    assert set(metadata["retrieval"]["contributions"][top]) >= {"history", "cited"}
    # The stored row and the admin audit carry the same manifest.
    admin = await login(client, await make_user(db, w.tenant, role="admin"))
    audited = await client.get(f"/admin/audit/turns/{body['turn_id']}", headers=admin.headers)
    assert audited.status_code == 200
    assert audited.json()["context_metadata"]["retrieval"] == metadata["retrieval"]


async def test_a_topic_switch_is_not_dragged_back_to_the_old_topic(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    w = await _world(client, db)
    await ask(client, w.owner, w.chat, "How do I renew my passport?")

    body = (
        await ask(client, w.owner, w.chat, "Are full-time students exempt from council tax?")
    ).json()

    metadata = body["context_metadata"]
    assert metadata["is_follow_up"] is False
    assert metadata["reformulated_query"] is None
    assert metadata["rewrite"]["by"] is None
    queries = {q["name"]: q for q in metadata["retrieval"]["queries"]}
    assert queries["history"]["weight"] < queries["question"]["weight"]
    assert "cited" not in queries  # an unrelated question does not lean on the last answer
    assert _titles(body)[0] == "Council tax for students"
    assert "Passport renewal" not in _titles(body)[:1]


async def test_documents_the_last_answer_cited_are_candidates_for_that_document(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    w = await _world(client, db)
    first = await ask(client, w.owner, w.chat, "How often must I renew my driving licence?")
    cited = first.json()["sources"][0]
    assert cited["title"] == "Driving licence renewal"

    body = (await ask(client, w.owner, w.chat, "What else does that document say?")).json()

    queries = {q["name"]: q for q in body["context_metadata"]["retrieval"]["queries"]}
    assert queries["cited"]["chunks"] == [cited["id"]]
    assert body["sources"][0]["id"] == cited["id"]
    assert "cited" in body["context_metadata"]["retrieval"]["contributions"][cited["id"]]


def _rewriter(messages: list[BaseMessage]) -> str:
    assert text_of(messages).startswith("Rewrite")
    return "driving licence renewal fee"


async def test_the_fast_model_rewrites_only_a_question_that_depends_on_the_conversation(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    w = await _world(client, db)
    main = ScriptedChatModel(reply=lambda _: "It is in the sources [1].")
    fast = ScriptedChatModel(reply=_rewriter)
    use_model(app, main)
    app.state.resources.turn_context.rewriter = ChatModelResponder(fast, "fast-model")

    await ask(client, w.owner, w.chat, "How often must I renew my driving licence?")
    assert fast.calls == []  # a first turn is never rewritten
    await ask(client, w.owner, w.chat, "Are full-time students exempt from council tax?")
    assert fast.calls == []  # nor a self-contained question
    body = (await ask(client, w.owner, w.chat, "And how much is it?")).json()

    assert len(fast.calls) == 1
    assert "council tax" in text_of(fast.calls[0])  # the conversation went to the rewrite
    assert all("Rewrite" not in text_of(c) for c in main.calls)  # the main model only answers
    metadata = body["context_metadata"]
    assert metadata["rewrite"] == {"by": "llm", "model": "fast-model"}
    # The user's own words are kept: "much" was dropped by the model and appended back.
    assert metadata["reformulated_query"] == "driving licence renewal fee much"
    queries = {q["name"]: q for q in metadata["retrieval"]["queries"]}
    assert queries["rewrite"]["text"] == "driving licence renewal fee much"
    assert queries["rewrite"]["weight"] == queries["history"]["weight"]


async def test_the_lifespan_gives_the_turns_the_configured_fast_model(settings: Settings) -> None:
    configured = settings.model_copy(
        update={
            "llm": "openai-compatible",
            "openai_base_url": "http://127.0.0.1:9/v1",
            "llm_model": "big",
            "llm_fast_model": "small",
        }
    )
    application = create_app(configured)
    async with application.router.lifespan_context(application):
        context = application.state.resources.turn_context
        assert context.rewriter is not None
        assert context.rewriter.model_name == "small"
        assert context.responder.model_name == "big"
