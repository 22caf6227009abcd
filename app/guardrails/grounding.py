"""Grounding: is each sentence of the answer supported by a source?

A sentence counts as supported when one source contains at least `min_overlap` of its content
words (by a five-letter stem, so "refunds" meets "refunded"); a sentence that cites `[n]` is
checked against those sources only. Lexical, deterministic and fast: it catches claims with
no footing in the passages (the common hallucination), not subtle contradictions.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TypedDict

from app.core.text import content_words
from app.llm.responder import EXTRACTIVE_NOTICE
from app.llm.shapes import SourceRef

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_CITATION = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")
MIN_WORDS = 3
"""Shorter sentences ("Yes.", "In short:") carry no checkable claim."""


def _stems(text: str) -> set[str]:
    return {w.lower()[:5] for w in content_words(text) if len(w) > 2}


class GroundingCheck(TypedDict):
    """How far an answer's sentences are backed by the sources they cite."""

    grounded: bool
    confidence: float
    issues: list[str]
    checked_sentences: int


def check_grounding(
    answer: str, sources: Sequence[SourceRef], min_overlap: float
) -> GroundingCheck:
    """How far each sentence of an answer is backed by the sources it cites (word-stem overlap)."""
    text = answer.removeprefix(EXTRACTIVE_NOTICE)
    sentences = [s.strip() for s in _SENTENCE.split(text) if s.strip()]
    source_stems = {s["n"]: _stems(f"{s['title']} {s['text']}") for s in sources}
    issues: list[str] = []
    scores: list[float] = []
    for index, sentence in enumerate(sentences, start=1):
        words = _stems(_CITATION.sub("", sentence))
        if len(words) < MIN_WORDS:
            continue
        cited = {int(n) for group in _CITATION.findall(sentence) for n in group.split(",")}
        candidates = [source_stems[n] for n in cited if n in source_stems] or list(
            source_stems.values()
        )
        best = max((len(words & stems) / len(words) for stems in candidates), default=0.0)
        scores.append(best)
        if best < min_overlap:
            issues.append(f"sentence {index} is not supported by a source: {sentence[:120]!r}")
    if not scores:
        return GroundingCheck(grounded=True, confidence=1.0, issues=[], checked_sentences=0)
    if not sources:
        issues = ["no sources to check the answer against", *issues]
    return GroundingCheck(
        grounded=not issues,
        confidence=round(sum(scores) / len(scores), 3),
        issues=issues,
        checked_sentences=len(scores),
    )
