"""Follow-up detection and rule-based rewriting into standalone queries."""

from __future__ import annotations

import pytest

from app.graph.followups import is_follow_up, keep_user_words, rewrite_by_rules
from app.turns.types import HistoryTurn


def turn(query: str, answer: str) -> HistoryTurn:
    return HistoryTurn(turn_id="t", user_query=query, answer=answer, status="complete")


PRODUCTS = turn(
    "Which laptops do you recommend for video editing?",
    "Three models fit:\n1. Aurora X15 with 32 GB RAM [1]\n2. Nimbus Pro 16 with an RTX 4070 [2]\n"
    "3. Vega Air 14, the lightest [3]",
)
REFUND = turn("What is the refund policy for damaged goods?", "30 days for a full refund [1].")


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("tell me more about that one", True),
        ("and the second?", True),
        ("why?", True),
        ("What about electronics?", True),
        ("How does the Nimbus Pro 16 compare with the Aurora X15 for rendering?", False),
        ("What is the onboarding process for new engineers in Berlin?", False),
    ],
)
def test_detection(query: str, expected: bool) -> None:
    assert is_follow_up(query, [PRODUCTS]) is expected


def test_nothing_is_a_follow_up_without_history() -> None:
    assert is_follow_up("tell me more about that one", []) is False


def test_an_ordinal_resolves_to_the_listed_item() -> None:
    rewritten = rewrite_by_rules("and the second?", [PRODUCTS])
    assert "Nimbus" in rewritten
    assert "Aurora" not in rewritten
    assert "[2]" not in rewritten
    assert "Vega" in rewrite_by_rules("tell me about the last one", [PRODUCTS])


def test_a_pronoun_borrows_the_previous_topic() -> None:
    rewritten = rewrite_by_rules("tell me more about that", [REFUND])
    assert "refund" in rewritten.lower()
    assert "damaged" in rewritten.lower()


def test_new_words_of_the_follow_up_are_kept() -> None:
    rewritten = rewrite_by_rules("and for electronics?", [REFUND])
    assert "electronics" in rewritten
    assert "refund" in rewritten.lower()


def test_a_rule_rewrite_keeps_the_question_verbatim() -> None:
    coalition = turn("Recent examples of cross-party coalitions?", "Several [1].")
    rewritten = rewrite_by_rules("Then how about in the past?", [coalition])
    assert rewritten.endswith("Then how about in the past?")
    assert "coalitions" in rewritten


def test_a_model_rewrite_gets_back_the_words_it_dropped() -> None:
    kept = keep_user_words("recent examples cross party coalition", "Then how about the past?")
    assert kept == "recent examples cross party coalition past"
    assert keep_user_words("refund window for electronics", "and for electronics?") == (
        "refund window for electronics"
    )


@pytest.mark.parametrize(
    "query", ["No, I meant for my company.", "Sorry, for a limited company", "Who was his teacher?"]
)
def test_corrections_and_personal_pronouns_lean_on_the_conversation(query: str) -> None:
    assert is_follow_up(query, [REFUND])
