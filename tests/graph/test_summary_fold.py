"""A fold keeps the summary the earlier prompts started with as the start of the next one
(their cached prefix), and rewrites it whole only when it has no room left (ADR 0035)."""

from __future__ import annotations

import itertools
import re

from langchain_core.messages import BaseMessage

from app.conversation.pipeline.summary import OMITTED, appended, fold_by_rules
from app.conversation.pipeline.summary_job import fold
from app.conversation.turn.types import HistoryTurn
from app.llm.responder import ChatModelResponder
from app.llm.tokens import count_tokens
from tests.fakes import ScriptedChatModel

CAP = 200


def turns(first: int, count: int) -> list[HistoryTurn]:
    return [
        HistoryTurn(
            turn_id=str(i),
            user_query=f"What does policy {i} say about leave?",
            answer=f"Policy {i} grants {i} extra days of leave [1].",
            status="complete",
        )
        for i in range(first, first + count)
    ]


def text_of(messages: list[BaseMessage]) -> str:
    return "\n".join(str(m.content) for m in messages)


def summariser(messages: list[BaseMessage]) -> str:
    """Names the policies of the new turns (an addition) or of everything (a merge)."""
    text = text_of(messages)
    new = text.split("New turns:")[1]
    if "Merge the new turns" in text:
        return "Merged: " + ", ".join(sorted(set(re.findall(r"policy \d+", text))))
    return "Then: " + ", ".join(sorted(set(re.findall(r"policy \d+", new))))


async def test_a_fold_with_room_appends_and_keeps_the_summary_as_its_start() -> None:
    model = ScriptedChatModel(reply=summariser)
    responder = ChatModelResponder(model, "fake")
    first = await fold(responder, "", turns(0, 5), CAP)
    second = await fold(responder, first, turns(5, 5), CAP)
    assert first == "Then: policy 0, policy 1, policy 2, policy 3, policy 4"
    assert second.startswith(first + "\n")
    assert second.endswith("policy 5, policy 6, policy 7, policy 8, policy 9")
    # The model was asked for the new turns only, shown the summary not to repeat it.
    assert "Summarise only the new turns" in text_of(model.calls[1])
    assert first in text_of(model.calls[1])


async def test_a_full_summary_is_merged_into_half_the_cap() -> None:
    model = ScriptedChatModel(reply=summariser)
    responder = ChatModelResponder(model, "fake")
    full = ""
    while CAP - count_tokens(full) >= CAP // 4:  # filled until an addition has no room
        i = full.count("\n") + bool(full)
        full = appended(full, f"- line {i} about policy {i} and its many conditions")
    merged = await fold(responder, full, turns(20, 5), CAP)
    assert merged.startswith("Merged: ")
    assert "policy 0" in merged and "policy 24" in merged
    assert "in at most 50 words" in text_of(model.calls[0])  # half the cap, in words


async def test_an_addition_over_the_room_falls_back_to_rules() -> None:
    model = ScriptedChatModel(reply=lambda _m: "word " * 400)
    responder = ChatModelResponder(model, "fake")
    folded = await fold(responder, "Earlier: policy 1.", turns(0, 2), CAP)
    assert folded.startswith("Earlier: policy 1.\n- Asked: What does policy 0 say")


def test_rules_append_and_past_the_cap_drop_to_half_of_it_at_once() -> None:
    cap = 400  # the default THREADLINE_SUMMARY_MAX_TOKENS; a batch of 5 lines is ~125 tokens
    summary = ""
    starts = []
    for batch in range(12):
        summary = fold_by_rules(summary, turns(5 * batch, 5), cap)
        assert count_tokens(summary) <= cap + count_tokens(OMITTED) + 1
        starts.append(summary.splitlines()[1 if summary.startswith(OMITTED) else 0])
    # The first line changes only when the cap is reached, not at every fold past it.
    changes = sum(a != b for a, b in itertools.pairwise(starts))
    assert 1 <= changes <= len(starts) // 2
    assert summary.startswith(OMITTED)  # kept once lines were dropped, fold after fold
