"""Fusing the dense and lexical legs into one ranking.

`zscore` (the default): each leg's candidates are reduced to one score per document (its best
chunk), standardised within the leg (z-scores, so cosine similarities and BM25 scores become
comparable), and combined as a weighted sum; a document one leg did not return counts as that
leg's weakest candidate (a leg whose candidates all tie, e.g. one lexical match, ranks them
one unit above the rest instead of saying nothing). Unlike reciprocal-rank fusion it keeps
how *far apart* the candidates are, which on SciFact is worth about two points of nDCG@10
(bench/retrieval_quality.py).

`rrf`: reciprocal-rank fusion over chunks, score = sum(weight / (k + rank)).

Either way a document's best chunk comes before a second chunk of any document, so `k`
passages cover as many documents as they can.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

FusionMethod = Literal["zscore", "rrf"]


class Scored(Protocol):
    """A hit of one retrieval leg, as fusion reads it."""

    @property
    def chunk_id(self) -> str:
        """The id of the chunk hit."""

    @property
    def document_key(self) -> str:
        """The document the chunk belongs to."""

    @property
    def score(self) -> float:
        """The leg's own score, higher is better."""


@dataclass(frozen=True)
class Fused:
    """A chunk and its score after fusing the legs."""

    chunk_id: str
    score: float


def fuse(
    legs: Mapping[str, Sequence[Scored]],
    weights: Mapping[str, float],
    *,
    method: FusionMethod,
    rrf_k: int,
    limit: int,
) -> list[Fused]:
    """The best `limit` chunks; each leg's hits come best first."""
    chunk_scores = _rrf(legs, weights, rrf_k) if method == "rrf" else _zscore(legs, weights)
    documents: dict[str, str] = {}
    for hits in legs.values():
        for hit in hits:
            documents[hit.chunk_id] = hit.document_key
    ranked = sorted(chunk_scores, key=lambda c: (-chunk_scores[c], c))
    seen: set[str] = set()
    firsts: list[str] = []
    seconds: list[str] = []
    for chunk in ranked:  # each document's best chunk, then the rest, each in score order
        (seconds if documents[chunk] in seen else firsts).append(chunk)
        seen.add(documents[chunk])
    return [Fused(c, round(chunk_scores[c], 6)) for c in [*firsts, *seconds][:limit]]


def _rrf(
    legs: Mapping[str, Sequence[Scored]], weights: Mapping[str, float], k: int
) -> dict[str, float]:
    scores: dict[str, float] = {}
    for leg, hits in legs.items():
        for rank, hit in enumerate(hits, start=1):
            scores[hit.chunk_id] = scores.get(hit.chunk_id, 0.0) + weights[leg] / (k + rank)
    return scores


_TIED = 1.0
"""The z-score of the documents of a leg whose candidates all score the same (a lexical leg
with one match): one unit above the documents it did not return, which count as 0."""


def _mean_and_spread(values: list[float]) -> tuple[float, float]:
    """The mean and population standard deviation (`statistics.pstdev` computes it in exact
    fractions: ten times slower, for digits the fusion rounds away)."""
    mean = math.fsum(values) / len(values)
    return mean, math.sqrt(math.fsum((x - mean) ** 2 for x in values) / len(values))


def _zscore(legs: Mapping[str, Sequence[Scored]], weights: Mapping[str, float]) -> dict[str, float]:
    total_weight = sum(weights[leg] for leg in legs) or 1.0
    per_leg: dict[str, dict[str, float]] = {}  # leg -> document -> standardised best score
    for leg, hits in legs.items():
        best: dict[str, float] = {}
        for hit in hits:
            best[hit.document_key] = max(best.get(hit.document_key, hit.score), hit.score)
        if best:
            mean, spread = _mean_and_spread(list(best.values()))
            if spread > 1e-12:  # not a rounding of equal scores
                per_leg[leg] = {doc: (score - mean) / spread for doc, score in best.items()}
            else:  # one candidate, or all tied: what it returned beats what it did not
                per_leg[leg] = {doc: _TIED for doc in best}
    floors = {leg: min(min(z.values()), 0.0) for leg, z in per_leg.items()}
    document_scores: dict[str, float] = {}
    for document in {doc for z in per_leg.values() for doc in z}:
        document_scores[document] = (
            sum(weights[leg] * z.get(document, floors[leg]) for leg, z in per_leg.items())
            / total_weight
        )
    # A chunk ranks with its document; within one, by its best standing in any leg.
    chunk_scores: dict[str, float] = {}
    for hits in legs.values():
        for rank, hit in enumerate(hits):
            tie_break = 1e-6 / (1 + rank)
            score = document_scores[hit.document_key] + tie_break
            chunk_scores[hit.chunk_id] = max(chunk_scores.get(hit.chunk_id, score), score)
    return chunk_scores
