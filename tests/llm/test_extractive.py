"""The offline responder answers from relevant sentences only, cites them, and says so."""

from __future__ import annotations

from app.conversation.turn.types import SourceRef
from app.llm.responder import EXTRACTIVE_NOTICE, NO_SOURCES, ExtractiveResponder


def source(n: int, text: str) -> SourceRef:
    return SourceRef(n=n, id=f"c{n}", kind="kb", source_id="d", title="t", score=1.0, text=text)


def test_only_relevant_sentences_are_used_and_cited() -> None:
    answer = ExtractiveResponder().compose(
        [
            source(1, "# Privacy\nYou can erase your account and all of its data at any time."),
            source(2, "Every answer cites sources with numbers like [1]. Admins add users."),
        ],
        [],
        "How do I erase my data?",
    )
    assert answer.startswith(EXTRACTIVE_NOTICE)
    assert "erase your account" in answer
    assert answer.rstrip().endswith("[1]")
    assert "Admins add users" not in answer  # the second source shares no word with the question
    assert "[2]" not in answer


def test_with_nothing_relevant_it_says_so() -> None:
    answer = ExtractiveResponder().compose(
        [source(1, "The canteen opens at noon on weekdays.")], [], "How do I erase my data?"
    )
    assert answer == NO_SOURCES


def test_a_follow_up_that_names_nothing_is_answered_from_its_standalone_query() -> None:
    sources = [
        source(1, "Erasing your data takes effect within thirty days of the request."),
        source(2, "The canteen opens at noon on weekdays."),
    ]
    question = "How long does it take?"  # no word of it is in the sources
    assert ExtractiveResponder().compose(sources, [], question) == NO_SOURCES
    answer = ExtractiveResponder().compose(
        sources, [], question, follow_up_query="erase data How long does it take?"
    )
    assert answer.startswith(EXTRACTIVE_NOTICE)
    assert "within thirty days" in answer and answer.rstrip().endswith("[1]")
    assert "canteen" not in answer


def test_a_heading_is_not_glued_into_the_sentence_after_it() -> None:
    """Issue 28, item 9: "Your data and privacy You can download…" on the default install."""
    answer = ExtractiveResponder().compose(
        [
            source(
                1,
                "## Your data and privacy\nYou can download your data as one JSON file.\n"
                "- Erase your account and your data from the My data page",
            )
        ],
        [],
        "How do I download or erase my data?",
    )
    assert "privacy" not in answer
    assert answer == (
        EXTRACTIVE_NOTICE + "You can download your data as one JSON file. "
        "Erase your account and your data from the My data page. [1]"
    )
