"""Which queries a turn searches with, and how much the conversation weighs (ADR 0034).

Every turn with history searches with the raw question (weight 1) and a history-conditioned
query (the previous question's words, then the question verbatim; with a model, its
standalone rewrite as well). How much the history query weighs is set by how related the
question is to the conversation, from two signals that mean the same under any embedder:

- `cue`: the question leans on something said before (a referring word in a short
  question, an ordinal, a correction, a return to an earlier topic, no content word at all
  or only unspecific ones: `is_follow_up`);
- `overlap`: the share of the question's content words the previous turn (question and
  answer) already used; for a return after a digression, the turn it returns to.

The documents the previous answer cited join the fusion with a weight that follows the same
score. The constants were tuned on the follow-up dev set only (bench/followups_tune.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.conversation.pipeline.followups import (
    fold,
    is_correction,
    is_follow_up,
    is_return,
    returns_to,
    rewrite_by_rules,
    said_words,
)
from app.conversation.turn.types import HistoryTurn
from app.core.text import content_words
from app.retrieval.multi_query import WeightedQuery


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
    returning: bool = False
    """The question returns to a turn before the last one: the last answer is a digression."""

    def as_dict(self) -> dict[str, float | bool]:
        """The signals as the manifest records them."""
        return {
            "cue": self.cue,
            "correction": self.correction,
            "returning": self.returning,
            "overlap": round(self.overlap, 3),
            "score": round(self.score, 3),
        }


def relatedness(
    query: str, history: Sequence[HistoryTurn], weighting: Weighting = WEIGHTING
) -> Relatedness:
    """The question's relatedness to the previous turn, or for a return after a digression
    to the turn it returns to (0 without history)."""
    if not history:
        return Relatedness(cue=False, overlap=0.0, score=0.0)
    target = returns_to(query, history)
    last = history[-1 if target is None else target]
    words = {fold(w) for w in content_words(query)}
    said = said_words(last["user_query"]) | said_words(last["answer"])
    overlap = len(words & said) / len(words) if words else 0.0
    cue = is_follow_up(query, history)
    score = min(1.0, float(cue) + overlap)
    return Relatedness(
        cue=cue,
        overlap=overlap,
        score=score,
        correction=is_correction(query),
        returning=target is not None,
    )


def thread(
    history: Sequence[HistoryTurn], weighting: Weighting = WEIGHTING, start: int | None = None
) -> list[int]:
    """The indices of the questions that are one thread, newest first: the one at `start`
    (default the last), and before it each one the next depended on, up to
    `history_turns`. A topic switch ends the thread; a return after a digression continues
    it at the turn it returned to, past the digression."""
    index = len(history) - 1 if start is None else start
    indices = [index] if history else []
    while history and len(indices) < weighting.history_turns and index > 0:
        newer, before = history[index]["user_query"], history[:index]
        target = resumes_at(newer, before, weighting)
        if target is not None:
            index = target
        elif depends_on_history(relatedness(newer, before, weighting), weighting):
            index -= 1
        else:
            break
        indices.append(index)
    return indices


def resumes_at(
    query: str, history: Sequence[HistoryTurn], weighting: Weighting = WEIGHTING
) -> int | None:
    """Where a return after a digression picks the conversation up: the turn it returns to
    (`returns_to`) and after it each follow-up that depended on the one before, up to the
    digression, so that "Going back to the wonder" after a question on the Danube resumes
    at the last question on the wonder, not at the first one that named it. None when the
    question does not return."""
    target = returns_to(query, history)
    if target is None:
        return None
    while target + 1 < len(history) - 1:
        newer, before = history[target + 1]["user_query"], history[: target + 1]
        if is_return(newer) or not depends_on_history(
            relatedness(newer, before, weighting), weighting
        ):
            break
        target += 1
    return target


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
    """The history-conditioned query: the thread's earlier questions' words, then the question.
    The thread is the last question's, or for a return after a digression the returned-to
    turn's."""
    if not history:
        return query
    turns = [history[i] for i in thread(history, weighting, resumes_at(query, history, weighting))]
    return rewrite_by_rules(query, history, thread=turns)


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
    """The weight of the documents the previous answer cited (none for a correction, nor for
    a return after a digression: that answer is the digression's)."""
    if related.returning or (related.correction and weighting.corrections_drop_cited):
        return 0.0
    return round(weighting.cited * related.score, 3)
