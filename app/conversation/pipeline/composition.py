"""Query composition: where the answer's context should come from.

`pure_kb` (the knowledge base), `pure_doc` (the session's attachments), `hybrid` (both) or
`chat` (the conversation itself). Decided first from the wording and what is available, then
corrected by what retrieval actually found.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from app.conversation.pipeline.state import Composition

_DOC_WORDING = re.compile(
    r"\b(?:(?:this|the|that|my|attached|uploaded|above)\s+(?:document|doc|file|pdf|attachment|"
    r"report|paper|contract|upload|text|slides?|spreadsheet)s?|attachments?|uploaded|attached)\b",
    re.IGNORECASE,
)
_KB_WORDING = re.compile(
    r"\b(?:policy|policies|documentation|docs|knowledge base|handbook|guideline|procedure|"
    r"according to (?:our|the company))\b",
    re.IGNORECASE,
)
_CHAT_WORDING = re.compile(
    r"^\s*(?:hi|hello|hey|good (?:morning|afternoon|evening)|thanks?(?: you)?|thank you|"
    r"ok(?:ay)?|great|cool|bye|goodbye)\b[\s!.,]*$"
    r"|\b(?:what did (?:i|you) (?:ask|say)|summari[sz]e (?:our|this) conversation|"
    r"earlier you said|you just said|my (?:last|previous) question)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class CompositionGuess:
    """Where a query's answer should come from, with a confidence and the reason."""

    composition: Composition
    confidence: float
    reason: str


def classify_query(query: str, *, attachments: int, knowledge_base: bool) -> CompositionGuess:
    """The composition before retrieval, from the wording and what exists to search."""
    doc = bool(_DOC_WORDING.search(query))
    if _CHAT_WORDING.search(query) and not doc:
        return CompositionGuess("chat", 0.9, "conversational wording")
    if attachments:
        if doc:
            return CompositionGuess("pure_doc", 0.85, "refers to the attached documents")
        if knowledge_base:
            kb = bool(_KB_WORDING.search(query))
            return CompositionGuess("hybrid", 0.55 if not kb else 0.65, "attachments and KB")
        return CompositionGuess("pure_doc", 0.75, "only attachments to search")
    if knowledge_base:
        kb = bool(_KB_WORDING.search(query))
        return CompositionGuess("pure_kb", 0.8 if kb else 0.7, "knowledge base available")
    return CompositionGuess("chat", 0.8, "nothing to retrieve from")


def refine_with_results(guess: CompositionGuess, kinds: Iterable[str]) -> CompositionGuess:
    """Correct the guess with the kinds of passages retrieval returned."""
    found = set(kinds)
    if guess.composition == "chat" and not found:
        return guess
    if not found:
        return CompositionGuess("chat", 0.9, "retrieval found nothing")
    if found == {"kb"}:
        composition: Composition = "pure_kb"
    elif found == {"attachment"}:
        composition = "pure_doc"
    else:
        composition = "hybrid"
    if composition == guess.composition:
        return CompositionGuess(composition, min(1.0, guess.confidence + 0.1), guess.reason)
    return CompositionGuess(composition, 0.7, f"retrieval found {'+'.join(sorted(found))}")
