"""Token budgeting: the budget formula, priorities by composition, de-duplication, truncation."""

from __future__ import annotations

from typing import Literal

from app.conversation.pipeline.budget import (
    SYSTEM_PROMPT,
    BudgetSettings,
    build_context,
    token_budget,
)
from app.conversation.turn.types import HistoryTurn, PassageData
from app.llm.tokens import count_tokens

DEFAULT = BudgetSettings(base=3500, per_result=500, cap=8000)


def passage(
    pid: str, kind: Literal["kb", "attachment"], text: str, score: float = 0.5
) -> PassageData:
    return PassageData(id=pid, kind=kind, source_id="s", title=pid, text=text, score=score)


def turn(i: int, answer: str = "An answer.") -> HistoryTurn:
    return HistoryTurn(
        turn_id=str(i), user_query=f"Question {i}?", answer=answer, status="complete"
    )


def test_the_budget_grows_per_result_up_to_the_cap() -> None:
    assert token_budget(DEFAULT, 0) == 3500
    assert token_budget(DEFAULT, 3) == 5000
    assert token_budget(DEFAULT, 20) == 8000


def test_tokens_are_counted_with_the_real_tokenizer() -> None:
    assert count_tokens("hello world") == 2
    assert count_tokens("antidisestablishmentarianism") > 1


def test_duplicates_are_dropped_and_recorded() -> None:
    same = "Refunds take 30 days."
    built = build_context(
        query="refund?",
        composition="pure_kb",
        passages=[passage("a", "kb", same, 0.9), passage("b", "kb", same.upper(), 0.8)],
        history=[],
        summary="",
        settings=DEFAULT,
    )
    assert [s["id"] for s in built.sources] == ["a"]
    assert built.metadata["dropped"] == [{"id": "b", "kind": "kb", "reason": "duplicate"}]
    assert built.metadata["truncation_applied"] is True


def test_priority_follows_the_composition() -> None:
    passages = [
        passage("kb1", "kb", "alpha " * 20, 0.9),
        passage("doc1", "attachment", "beta " * 20, 0.5),
    ]
    order = {
        composition: [
            s["id"]
            for s in build_context(
                query="q",
                composition=composition,
                passages=passages,
                history=[],
                summary="",
                settings=DEFAULT,
            ).sources
        ]
        for composition in ("pure_kb", "pure_doc", "hybrid")
    }
    assert order["pure_kb"] == ["kb1", "doc1"]
    assert order["pure_doc"] == ["doc1", "kb1"]
    assert order["hybrid"] == ["doc1", "kb1"]


def test_an_oversized_passage_is_cut_to_what_is_left_and_the_cut_is_recorded() -> None:
    small = BudgetSettings(base=300, per_result=0, cap=300)
    built = build_context(
        query="q",
        composition="pure_kb",
        passages=[passage("big", "kb", "word " * 1000)],
        history=[],
        summary="",
        settings=small,
    )
    assert built.metadata["token_count"] <= 300
    (cut,) = built.metadata["truncated"]
    assert cut["id"] == "big"
    assert cut["tokens_after"] < cut["tokens_before"]
    assert built.metadata["sources"][0]["tokens"] == cut["tokens_after"]


def test_chat_puts_history_first_and_keeps_the_newest_turns() -> None:
    small = BudgetSettings(base=250, per_result=0, cap=250)
    history = [turn(i, "filler " * 30) for i in range(6)]
    built = build_context(
        query="and then?",
        composition="chat",
        passages=[],
        history=history,
        summary="",
        settings=small,
    )
    kept = [t["turn_id"] for t in built.history_included]
    assert kept == [str(i) for i in range(6 - len(kept), 6)]  # the newest, in order
    assert [t["turn_id"] for t in built.overflow] == [str(i) for i in range(6 - len(kept))]
    assert built.metadata["history_turns_included"] == len(kept)
    assert built.metadata["source_distribution"]["history"] > 0


def test_kb_turns_keep_a_reserve_for_history() -> None:
    passages = [passage(f"p{i}", "kb", "lorem ipsum dolor " * 60, 0.9 - i / 10) for i in range(5)]
    built = build_context(
        query="q",
        composition="pure_kb",
        passages=passages,
        history=[turn(1)],
        summary="",
        settings=BudgetSettings(base=600, per_result=0, cap=600),
    )
    assert built.metadata["history_turns_included"] == 1
    assert built.metadata["token_count"] <= 600


def test_every_context_metadata_key_is_present() -> None:
    built = build_context(
        query="q",
        composition="pure_kb",
        passages=[passage("a", "kb", "text")],
        history=[turn(1)],
        summary="Earlier: things.",
        settings=DEFAULT,
    )
    assert {
        "token_budget",
        "token_count",
        "truncation_applied",
        "source_distribution",
        "quality_score",
        "sources",
        "history_turns_included",
    } <= built.metadata.keys()
    assert 0.0 <= built.metadata["quality_score"] <= 1.0
    assert built.metadata["summary_included"] is True


def test_truncation_keeps_an_exact_prefix_of_multibyte_text() -> None:
    from app.llm.tokens import truncate_to_tokens

    text = "数据保护 🚀🚀🚀 élève " * 40
    for limit in range(1, 60, 7):
        head = truncate_to_tokens(text, limit)
        assert text.startswith(head)
        assert "\ufffd" not in head


def test_the_prompt_starts_with_what_stays_and_ends_with_what_is_new() -> None:
    """Cache-friendly order (ADR 0035): instructions, summary, history oldest first, then the
    sources and the question together in the last message."""
    built = build_context(
        query="What about refunds?",
        composition="pure_kb",
        passages=[passage("a", "kb", "Refunds take 30 days.")],
        history=[turn(1), turn(2)],
        summary="Earlier: things.",
        settings=DEFAULT,
    )
    roles = [m["role"] for m in built.prompt]
    assert roles == ["system", "system", "user", "assistant", "user", "assistant", "user"]
    assert built.prompt[0]["content"] == SYSTEM_PROMPT
    assert built.prompt[1]["content"].endswith("Earlier: things.")
    assert [m["content"] for m in built.prompt[2:6:2]] == ["Question 1?", "Question 2?"]
    last = built.prompt[-1]["content"]
    assert "Refunds take 30 days." in last and last.endswith("What about refunds?")
    assert built.metadata["stable_prefix_messages"] == 6


def test_the_next_turn_repeats_this_prompt_as_its_prefix() -> None:
    """Between two folds the summary is unchanged and history only grows: every message but
    the last (sources and question) comes back identical, in place."""
    first = build_context(
        query="q1",
        composition="pure_kb",
        passages=[passage("a", "kb", "Alpha text.")],
        history=[turn(1), turn(2)],
        summary="Earlier: things.",
        settings=DEFAULT,
    )
    second = build_context(
        query="q2",
        composition="pure_kb",
        passages=[passage("b", "kb", "Beta text.")],
        history=[turn(1), turn(2), turn(3)],
        summary="Earlier: things.",
        settings=DEFAULT,
    )
    assert second.prompt[: len(first.prompt) - 1] == first.prompt[:-1]


def test_uncovered_history_over_the_budget_is_cut_oldest_first_and_recorded() -> None:
    history = [turn(i, answer="word " * 120) for i in range(8)]
    built = build_context(
        query="q",
        composition="chat",
        passages=[],
        history=history,
        summary="",
        settings=BudgetSettings(base=700, per_result=0, cap=700),
    )
    kept = built.metadata["history_turn_ids"]
    assert kept and kept == [t["turn_id"] for t in history[-len(kept) :]]
    assert [t["turn_id"] for t in built.overflow] == [t["turn_id"] for t in history[: -len(kept)]]
    cut = [t for t in built.metadata["truncated"] if t["kind"] == "history"]
    assert cut == [
        {
            "kind": "history",
            "turns": len(built.overflow),
            "reason": "over budget; the background summary will cover them",
        }
    ]
