"""Query composition on a table of examples: wording, attachments, knowledge base, results."""

from __future__ import annotations

from typing import cast

import pytest

from app.conversation.pipeline.composition import (
    CompositionGuess,
    classify_query,
    refine_with_results,
)
from app.conversation.pipeline.state import Composition

# (query, active attachments, knowledge base has documents, expected composition)
BEFORE_RETRIEVAL = [
    ("hi", 0, True, "chat"),
    ("Thanks!", 2, True, "chat"),
    ("What did you say earlier about pricing?", 0, True, "chat"),
    ("What is the parental leave policy?", 0, True, "pure_kb"),
    ("How do I reset my VPN token?", 0, True, "pure_kb"),
    ("What is the parental leave policy?", 0, False, "chat"),
    ("Summarise the attached document", 1, True, "pure_doc"),
    ("What does this contract say about termination?", 1, True, "pure_doc"),
    ("What are the key figures in the report?", 1, False, "pure_doc"),
    ("Does the offer comply with our travel policy?", 1, True, "hybrid"),
    ("Compare these numbers with last year", 2, True, "hybrid"),
]


@pytest.mark.parametrize(("query", "attachments", "kb", "expected"), BEFORE_RETRIEVAL)
def test_classification_before_retrieval(
    query: str, attachments: int, kb: bool, expected: str
) -> None:
    guess = classify_query(query, attachments=attachments, knowledge_base=kb)
    assert guess.composition == expected
    assert 0.0 < guess.confidence <= 1.0


# (guess, kinds of passages found, expected composition)
AFTER_RETRIEVAL = [
    ("pure_kb", [], "chat"),
    ("pure_kb", ["kb", "kb"], "pure_kb"),
    ("hybrid", ["kb"], "pure_kb"),
    ("hybrid", ["attachment"], "pure_doc"),
    ("hybrid", ["kb", "attachment"], "hybrid"),
    ("pure_doc", ["attachment", "kb"], "hybrid"),
    ("chat", [], "chat"),
]


@pytest.mark.parametrize(("guess", "kinds", "expected"), AFTER_RETRIEVAL)
def test_retrieval_results_correct_the_guess(guess: str, kinds: list[str], expected: str) -> None:
    refined = refine_with_results(CompositionGuess(cast(Composition, guess), 0.6, "test"), kinds)
    assert refined.composition == expected


def test_confirmation_raises_confidence_and_contradiction_lowers_it() -> None:
    guess = CompositionGuess("pure_kb", 0.8, "test")
    assert refine_with_results(guess, ["kb"]).confidence > 0.8
    assert refine_with_results(guess, ["attachment"]).confidence < 0.8
