"""Follow-up detection and rule-based rewriting into standalone queries."""

from __future__ import annotations

import pytest

from app.conversation.pipeline.followups import (
    is_follow_up,
    is_return,
    keep_user_words,
    names_nothing,
    returns_to,
    rewrite_by_rules,
)
from app.conversation.turn.types import HistoryTurn
from app.core.text import content_words


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


@pytest.mark.parametrize(
    "query",
    [
        "What's the price?",
        "What\u2019s the fee?",
        "What happens at the end?",
        "For how long?",
        "What do I have to do first?",
        "How many days do I have?",
    ],
)
def test_a_question_that_names_nothing_leans_on_the_conversation(query: str) -> None:
    assert names_nothing(content_words(query.replace("\u2019", "'")))
    assert is_follow_up(query, [PRODUCTS])
    assert not is_follow_up(query, [])


@pytest.mark.parametrize(
    "query",
    [
        "What's the price of the Aurora X15?",
        "How long is the Danube?",
        "When are invoices due?",
        "What changes once I turn 70?",
        "How often should API keys be rotated?",
    ],
)
def test_a_question_that_names_something_reads_on_its_own(query: str) -> None:
    assert not names_nothing(content_words(query))
    assert not is_follow_up(query, [PRODUCTS])


GARDENS = turn(
    "Did the Hanging Gardens of Babylon really exist?",
    "One of the Seven Wonders of the Ancient World; no trace of them was found [1].",
)
BUILT = turn("Who is said to have built them?", "Nebuchadnezzar II, by tradition [1].")
DANUBE = turn("How long is the Danube?", "About 2,850 km, through ten countries [1].")


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("Going back to the wonder, who were they made for?", True),
        ("Back to the card: does it have an annual fee?", True),
        ("OK, returning to the panels: what about the garden?", True),
        ("Earlier you said the fee is waived; for how long?", True),
        ("Can I send the parcel back to the shop?", False),
        ("What is the process for returning to work after leave?", False),
    ],
)
def test_a_return_to_an_earlier_topic(query: str, expected: bool) -> None:
    assert is_return(query) is expected


def test_a_return_goes_back_to_the_turn_it_names_past_the_digression() -> None:
    history = [GARDENS, BUILT, DANUBE]
    assert returns_to("Going back to the wonder, who were they made for?", history) == 0
    # Naming nothing the earlier turns said, it goes back to the turn before the digression.
    assert returns_to("Going back to that, who paid for it?", history) == 1
    assert returns_to("How long is the Rhine?", history) is None
    assert returns_to("Going back to the wonder, who were they made for?", [GARDENS]) is None
    rewritten = rewrite_by_rules("Going back to the wonder, who were they made for?", history)
    assert "Babylon" in rewritten
    assert "Danube" not in rewritten
    assert rewritten.endswith("Going back to the wonder, who were they made for?")
