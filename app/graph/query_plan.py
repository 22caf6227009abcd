"""Which queries a turn searches with, and how much the conversation weighs (ADR 0034).

Every turn with history searches with the raw question (weight 1) and a history-conditioned
query (the previous question's words, then the question verbatim; with a model, its
standalone rewrite as well). How much the history query weighs is set by how related the
question is to the conversation, from two signals that mean the same under any embedder:

- `cue`: the question leans on something said before (a referring word in a short
  question, an ordinal, a correction, no content word at all: `is_follow_up`);
- `overlap`: the share of the question's content words the previous turn (question and
  answer) already used.

The documents the previous answer cited join the fusion with a weight that follows the same
score. The constants were tuned on the follow-up dev set only (bench/followups_tune.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.core.text import content_words
from app.graph.followups import is_correction, is_follow_up, rewrite_by_rules
from app.retrieval.multi_query import WeightedQuery
from app.turns.types import HistoryTurn


@dataclass(frozen=True)
class Weighting:
    """The history query's weight: `base + cue x cue_weight + overlap x overlap_weight`,
    capped at `cap`; the cited documents' leg gets `cited x` the same relatedness score."""

    base: float = 0.25
    cue_weight: float = 0.75
    overlap_weight: float = 0.5
    cap: float = 1.0
    cited: float = 0.5
    correction_history: float | None = None
    """A correction's history weight, if not the formula's (None: the formula)."""
    corrections_drop_cited: bool = True
    """A correction ("No, I meant …") does not lift what the previous answer cited."""
    history_turns: int = 3
    """At most how many earlier questions the history query borrows words from: the last
    one, and before it those the later ones followed up on (a chain of follow-ups)."""
    depends: float = 0.5
    """Relatedness from which the question depends on the conversation: the model is asked
    for a standalone rewrite (when there is a model), and `is_follow_up` is true."""


WEIGHTING = Weighting()


@dataclass(frozen=True)
class Relatedness:
    """How much a question leans on the conversation: its two signals and their score."""

    cue: bool
    overlap: float
    score: float
    correction: bool = False
    """The question corrects the previous one: what that answer cited is what it did not mean."""

    def as_dict(self) -> dict[str, float | bool]:
        """The signals as the manifest records them."""
        return {
            "cue": self.cue,
            "correction": self.correction,
            "overlap": round(self.overlap, 3),
            "score": round(self.score, 3),
        }


def _stem(word: str) -> str:
    """A crude plural fold, so "moons" meets "moon"."""
    word = word.lower()
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def relatedness(
    query: str, history: Sequence[HistoryTurn], weighting: Weighting = WEIGHTING
) -> Relatedness:
    """The question's relatedness to the previous turn (0 without history)."""
    if not history:
        return Relatedness(cue=False, overlap=0.0, score=0.0)
    last = history[-1]
    words = {_stem(w) for w in content_words(query)}
    said = {_stem(w) for w in content_words(f"{last['user_query']} {last['answer']}")}
    overlap = len(words & said) / len(words) if words else 0.0
    cue = is_follow_up(query, history)
    score = min(1.0, float(cue) + overlap)
    return Relatedness(cue=cue, overlap=overlap, score=score, correction=is_correction(query))


def thread_length(history: Sequence[HistoryTurn], weighting: Weighting = WEIGHTING) -> int:
    """How many of the last questions are one thread: the last, and each earlier one that
    the next depended on (a topic switch ends the thread)."""
    length = 1
    while length < min(weighting.history_turns, len(history)):
        newer = history[-length]
        before = history[:-length]
        if not depends_on_history(relatedness(newer["user_query"], before, weighting), weighting):
            break
        length += 1
    return length


def history_weight(related: Relatedness, weighting: Weighting = WEIGHTING) -> float:
    """The history-conditioned query's weight beside the raw question's 1."""
    if related.correction and weighting.correction_history is not None:
        return weighting.correction_history
    weight = (
        weighting.base
        + weighting.cue_weight * float(related.cue)
        + weighting.overlap_weight * related.overlap
    )
    return round(min(weighting.cap, weight), 3)


def depends_on_history(related: Relatedness, weighting: Weighting = WEIGHTING) -> bool:
    """Whether the question needs the conversation to be understood."""
    return related.score >= weighting.depends


def history_query(
    query: str, history: Sequence[HistoryTurn], weighting: Weighting = WEIGHTING
) -> str:
    """The history-conditioned query: the thread's earlier questions' words, then the question."""
    return rewrite_by_rules(query, history, thread_length(history, weighting))


def plan_queries(
    query: str,
    history: Sequence[HistoryTurn],
    related: Relatedness,
    *,
    rewrite: str | None = None,
    weighting: Weighting = WEIGHTING,
) -> list[WeightedQuery]:
    """The raw question, then (with history) the history query and the model's rewrite."""
    queries = [WeightedQuery("question", query, 1.0)]
    if not history:
        return queries
    weight = history_weight(related, weighting)
    queries.append(WeightedQuery("history", history_query(query, history, weighting), weight))
    if rewrite and rewrite.strip().lower() != query.strip().lower():
        queries.append(WeightedQuery("rewrite", rewrite, weight))
    return queries


def cited_weight(related: Relatedness, weighting: Weighting = WEIGHTING) -> float:
    """The weight of the documents the previous answer cited (none for a correction)."""
    if related.correction and weighting.corrections_drop_cited:
        return 0.0
    return round(weighting.cited * related.score, 3)
