"""Several queries, one ranking: the legs of every query (and the documents an earlier answer
cited) fused by the hybrid search's own fusion (`app.retrieval.fusion`).

A turn in a conversation searches with the raw question and with queries that carry the
conversation (`app.conversation.pipeline.query_plan`), each with a weight. Every query's dense and
lexical
legs become legs of one fusion, weighted `query weight x leg weight`; so a query of weight 0
changes nothing and the raw question alone ranks exactly as a single search does.

The documents the previous answer cited are one more leg, `cited`: among the candidates the
queries brought, a chunk of a cited document scores 1, any other 0. Under z-score fusion that
lifts the cited documents by a margin set by its weight; under reciprocal rank it ranks them
first in that leg.

Which query brought each passage is recorded (`contributions`): the queries whose own
ranking (their legs fused alone) has the passage's document among the first `k`, and `cited`
when its document was cited.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from app.retrieval.base import Hit, MultiQueryResult, WeightedQuery
from app.retrieval.fusion import FusionMethod, Scored, fuse

__all__ = ["CITED", "MultiQueryResult", "WeightedQuery", "fuse_queries"]

CITED = "cited"


@dataclass(frozen=True)
class _CitedScore:
    """A candidate chunk as the `cited` leg scores it (1: its document was cited)."""

    chunk_id: str
    document_key: str
    score: float


def fuse_queries(
    per_query: Mapping[str, Mapping[str, Sequence[Hit]]],
    weights: Mapping[str, float],
    *,
    leg_weights: Mapping[str, float],
    method: FusionMethod,
    rrf_k: int,
    k: int,
    cited: Sequence[str] = (),
    cited_weight: float = 0.0,
) -> MultiQueryResult:
    """The `k` best passages of all queries' legs fused; `per_query` maps a query's name to
    its legs' hits (best first), `cited` lists the chunk ids the previous answer cited."""
    legs: dict[str, Sequence[Scored]] = {}
    fused_weights: dict[str, float] = {}
    found: dict[str, Hit] = {}
    for name, by_leg in per_query.items():
        if weights[name] <= 0:
            continue
        for leg, hits in by_leg.items():
            legs[f"{name}:{leg}"] = hits
            fused_weights[f"{name}:{leg}"] = weights[name] * leg_weights[leg]
            found.update((hit.chunk_id, hit) for hit in hits if hit.chunk_id not in found)
    cited_documents = {found[c].document_key for c in cited if c in found}
    if cited_documents and cited_weight > 0:
        legs[CITED] = _cited_leg(found, cited, cited_documents, method)
        fused_weights[CITED] = cited_weight
    fused = fuse(legs, fused_weights, method=method, rrf_k=rrf_k, limit=k)
    hits = [
        replace(found[f.chunk_id], passage=replace(found[f.chunk_id].passage, score=f.score))
        for f in fused
    ]
    tops = {
        name: _top_documents(by_leg, leg_weights, method, rrf_k, k)
        for name, by_leg in per_query.items()
        if weights[name] > 0
    }
    contributions = {
        hit.chunk_id: [name for name, top in tops.items() if hit.document_key in top]
        + ([CITED] if hit.document_key in cited_documents and CITED in legs else [])
        for hit in hits
    }
    return MultiQueryResult(hits, contributions)


def _cited_leg(
    found: Mapping[str, Hit],
    cited: Sequence[str],
    cited_documents: set[str],
    method: FusionMethod,
) -> list[_CitedScore]:
    """z-scores: every candidate, 1 for a chunk of a cited document, else 0 (a leg of equal
    scores would say nothing). Reciprocal rank: the cited chunks, in the order cited."""
    if method == "rrf":
        return [_CitedScore(c, found[c].document_key, 1.0) for c in cited if c in found]
    scored = [
        _CitedScore(hit.chunk_id, hit.document_key, float(hit.document_key in cited_documents))
        for hit in found.values()
    ]
    return sorted(scored, key=lambda s: -s.score)


def _top_documents(
    by_leg: Mapping[str, Sequence[Hit]],
    leg_weights: Mapping[str, float],
    method: FusionMethod,
    rrf_k: int,
    k: int,
) -> set[str]:
    """The documents of one query's own first `k` passages (its legs fused alone)."""
    documents = {hit.chunk_id: hit.document_key for hits in by_leg.values() for hit in hits}
    fused = fuse(by_leg, leg_weights, method=method, rrf_k=rrf_k, limit=k)
    return {documents[f.chunk_id] for f in fused}
