"""Hybrid retrieval: pgvector HNSW (cosine) + PostgreSQL full text, fused (z-scores by default,
or reciprocal rank).

Each leg searches each source (the knowledge base, the session's attachments) with one of
three queries (`app.retrieval.repository`): the nearest chunks by embedding for the dense
leg; for the lexical leg, BM25 over the knowledge base (term statistics and an inverted
index per tenant, kept by triggers) and `ts_rank_cd` over attachments, a handful of
documents. Optionally (z-score fusion, `THREADLINE_RETRIEVAL_COMPLETE_SCORES`) each leg then
also scores the documents only the other leg brought (`_complete`, two small statements by
document id); the legs' candidates are fused (`app.retrieval.fusion`).

It is over 300 lines because the legs, their score completion and the retriever that runs
them per query and per source read as one search; split, each part would need the others.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace
from typing import Any, Literal

from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.embeddings.base import Embedder, query_input
from app.retrieval.base import Hit, Passage
from app.retrieval.fusion import FusionMethod, fuse
from app.retrieval.multi_query import MultiQueryResult, WeightedQuery, fuse_queries
from app.retrieval.repository import ATTACHMENTS, KB, SearchRepository, Source

logger = logging.getLogger(__name__)

Leg = Literal["dense", "lexical"]
CitedLoader = Callable[[AsyncSession], Awaitable[Sequence[str]]]
"""Reads the chunk ids an earlier answer cited, in a transaction of its own."""


@dataclass(frozen=True)
class FusionSettings:
    """How many candidates each leg brings, how they are fused, how the index is searched."""

    candidates: int = 40
    method: FusionMethod = "zscore"
    k: int = 60
    """The reciprocal-rank constant (method `rrf`)."""
    dense_weight: float = 1.0
    lexical_weight: float = 1.0
    title_weight: float = 2.0
    """How many times a title word counts in BM25 (the lexical leg over the knowledge base)."""
    ef_search: int = 100
    exact_scan_max_chunks: int = 10_000
    """A knowledge base this small is searched exactly (its rows through the tenant's btree,
    sorted by distance) instead of through the shared HNSW index."""
    complete_scores: bool = False
    """z-score fusion: each leg also scores the candidates only the other leg brought
    (`_complete`), instead of counting them as its weakest candidate. Off by default: it
    lifts SciFact but not the follow-up dev set (ADR 0037)."""

    @classmethod
    def from_settings(cls, settings: Settings) -> FusionSettings:
        """The fusion as configured (`THREADLINE_RETRIEVAL_*`, `THREADLINE_HNSW_EF_SEARCH`)."""
        return cls(
            candidates=settings.retrieval_candidates,
            method=settings.retrieval_fusion,
            k=settings.retrieval_fusion_k,
            dense_weight=settings.retrieval_dense_weight,
            lexical_weight=settings.retrieval_lexical_weight,
            title_weight=settings.retrieval_title_weight,
            ef_search=settings.hnsw_ef_search,
            exact_scan_max_chunks=settings.retrieval_exact_scan_max_chunks,
            complete_scores=settings.retrieval_complete_scores,
        )


@dataclass(frozen=True)
class _Search:
    """One search's inputs, shared by its legs."""

    repository: SearchRepository
    query: str
    vector: list[float] | None
    attachment_ids: Sequence[uuid.UUID]
    exact_kb: bool
    limit: int
    title_weight: float


async def _dense(search: _Search, source: Source) -> list[Hit]:
    """The chunks nearest to the question's embedding."""
    assert search.vector is not None
    # A session's attachments, or a small knowledge base, are a sliver of the shared index:
    # an iterative scan would walk past thousands of other tenants' rows to collect them, an
    # exact scan reads only theirs.
    exact = source.kind == "attachment" or search.exact_kb
    return await search.repository.nearest(
        source,
        search.vector,
        limit=search.limit,
        exact=exact,
        attachment_ids=search.attachment_ids,
    )


async def _lexical(search: _Search, source: Source) -> list[Hit]:
    """The chunks matching the question's words: BM25 over the knowledge base, whose term
    statistics are kept; `ts_rank_cd` over attachments, too few for statistics to mean much."""
    if source.kind == "kb":
        return await search.repository.bm25(
            search.query, limit=search.limit, title_weight=search.title_weight
        )
    return await search.repository.text_ranked(
        source, search.query, limit=search.limit, attachment_ids=search.attachment_ids
    )


_LEGS = {"dense": _dense, "lexical": _lexical}


def _retrieve_outcome(future: asyncio.Future[Any]) -> None:
    """Mark a background embedding's failure as seen: the search that needed it re-raises it;
    one that did not (the dense leg dropped) must not log "exception never retrieved"."""
    if not future.cancelled():
        future.exception()


def _background(
    vectors: Awaitable[Sequence[list[float]]],
) -> asyncio.Future[Sequence[list[float]]]:
    """Query vectors being computed (or awaited) while the search goes on."""
    future = asyncio.ensure_future(vectors)
    future.add_done_callback(_retrieve_outcome)
    return future


def _missing(hits: Sequence[Hit], kind: str, present: set[str]) -> list[uuid.UUID]:
    """The documents of `kind` among `hits` that are not in `present` (document keys)."""
    keys = dict.fromkeys(h.document_key for h in hits if h.passage.kind == kind)
    return [uuid.UUID(key.split(":", 1)[1]) for key in keys if key not in present]


async def _complete(
    search: _Search, sources: Sequence[Source], by_leg: dict[str, list[Hit]]
) -> None:
    """Give every candidate a score in both legs: the dense leg scores the documents only
    the lexical leg brought (their nearest chunk), the lexical leg those only the dense leg
    brought (their best BM25 chunk, or 0 when none of the question's words is in them).

    Without it, z-score fusion counts a document one leg did not return as that leg's
    weakest candidate, which guesses low for a document just past the leg's cut and high
    for one without a single query word; with it the fusion compares real scores
    (SciFact dev, offline replica: +0.004 nDCG@10 at 40 candidates a leg, +0.009 at 100;
    the follow-up dev set's /chat nDCG@5 falls 0.004 and 0.018: off by default, ADR 0036)."""
    dense, lexical = by_leg["dense"], by_leg["lexical"]
    in_dense = {h.document_key for h in dense}
    in_lexical = {h.document_key for h in lexical}
    for source in sources:
        only_lexical = _missing(lexical, source.kind, in_dense)
        if only_lexical and search.vector is not None:
            dense += await search.repository.similarities(source, search.vector, only_lexical)
        only_dense = _missing(dense, source.kind, in_lexical)
        if not only_dense:
            continue
        if source.kind == "kb":
            lexical += await search.repository.bm25(
                search.query, limit=None, title_weight=search.title_weight, document_ids=only_dense
            )
        else:
            lexical += await search.repository.text_ranked(
                source, search.query, limit=None, attachment_ids=only_dense
            )
    # A candidate without one of the question's words scores 0 in the lexical leg (with its
    # nearest chunk standing for it) rather than being left out.
    matched = {h.document_key for h in lexical}
    for hit in dense:
        if hit.document_key not in matched:
            lexical.append(replace(hit, passage=replace(hit.passage, score=0.0)))
            matched.add(hit.document_key)
    dense.sort(key=lambda h: -h.passage.score)
    lexical.sort(key=lambda h: -h.passage.score)


class HybridRetriever:
    """The chat pipeline's retriever: both legs over the knowledge base and attachments."""

    def __init__(self, embedder: Embedder, settings: FusionSettings) -> None:
        self.embedder = embedder
        self.settings = settings

    async def search(
        self,
        db: AsyncSession,
        tenant_id: uuid.UUID,
        query: str,
        *,
        attachment_ids: Sequence[uuid.UUID],
        k: int,
    ) -> list[Passage]:
        """The `k` best passages of the knowledge base and of these attachments."""
        hits = await self.search_hits(db, tenant_id, query, attachment_ids=attachment_ids, k=k)
        return [hit.passage for hit in hits]

    async def search_queries(
        self,
        transaction: Callable[[], AbstractAsyncContextManager[AsyncSession]],
        tenant_id: uuid.UUID,
        queries: Sequence[WeightedQuery],
        *,
        attachment_ids: Sequence[uuid.UUID],
        k: int,
        cited: CitedLoader | None = None,
        cited_weight: float = 0.0,
    ) -> MultiQueryResult:
        """The `k` best passages for several weighted queries (and the chunks an earlier
        answer cited, read by `cited`), fused as one search (app/retrieval/multi_query.py).

        The queries search in one transaction (`transaction()`, scoped to the tenant: a
        turn's read transaction, ADR 0070), sharing one preparation of the search; the
        citations are read in it too. Their lexical legs run while they are embedded."""
        used = [q for q in queries if q.weight > 0]
        # One batch, run while the search is prepared and the lexical legs run.
        embedding = _background(self.embedder.embed([query_input(q.text) for q in used]))
        async with transaction() as db:
            per_query = await self.query_legs(
                db,
                tenant_id,
                [q.text for q in used],
                attachment_ids=attachment_ids,
                vectors=embedding,
            )
            cited_ids = list(await cited(db)) if cited is not None and cited_weight > 0 else []
        return fuse_queries(
            {q.name: by_leg for q, by_leg in zip(used, per_query, strict=True)},
            {q.name: q.weight for q in used},
            leg_weights=self.leg_weights(),
            method=self.settings.method,
            rrf_k=self.settings.k,
            k=k,
            cited=cited_ids,
            cited_weight=cited_weight,
        )

    async def search_hits(
        self,
        db: AsyncSession,
        tenant_id: uuid.UUID,
        query: str,
        *,
        k: int,
        attachment_ids: Sequence[uuid.UUID] = (),
        knowledge_base: bool = True,
        legs: Sequence[Leg] = ("dense", "lexical"),
    ) -> list[Hit]:
        """The `k` best chunks by fusion of the requested legs (app/retrieval/fusion.py)."""
        settings = self.settings
        (by_leg,) = await self.query_legs(
            db,
            tenant_id,
            [query],
            attachment_ids=attachment_ids,
            knowledge_base=knowledge_base,
            legs=legs,
        )
        weights = self.leg_weights()
        fused = fuse(by_leg, weights, method=settings.method, rrf_k=settings.k, limit=k)
        found = {hit.chunk_id: hit for hits in by_leg.values() for hit in hits}
        return [
            replace(found[f.chunk_id], passage=replace(found[f.chunk_id].passage, score=f.score))
            for f in fused
        ]

    def leg_weights(self) -> dict[str, float]:
        """Each leg's weight in the fusion (`THREADLINE_RETRIEVAL_*_WEIGHT`)."""
        return {"dense": self.settings.dense_weight, "lexical": self.settings.lexical_weight}

    async def query_legs(
        self,
        db: AsyncSession,
        tenant_id: uuid.UUID,
        queries: Sequence[str],
        *,
        attachment_ids: Sequence[uuid.UUID] = (),
        knowledge_base: bool = True,
        legs: Sequence[Leg] = ("dense", "lexical"),
        vectors: Awaitable[Sequence[list[float]]] | None = None,
    ) -> list[dict[str, list[Hit]]]:
        """Each query's candidates per leg, best first, unfused: the queries are embedded in
        one call (unless `vectors` is given: an awaitable of their vectors) and share one
        preparation of the search.

        The embedding runs while the search is prepared and each query's lexical leg runs:
        only the dense leg waits for it (a turn's history query is still being embedded when
        retrieval starts)."""
        settings = self.settings
        repository = SearchRepository(db, tenant_id)
        embedding = None
        if "dense" in legs:
            embedding = _background(
                vectors or self.embedder.embed([query_input(q) for q in queries])
            )
        searchable, model = await repository.prepare(ef_search=settings.ef_search)
        if model is not None and model != self.embedder.name and "dense" in legs:
            # `threadline reindex` switched the stored vectors to another model: this
            # process's query vectors are not comparable with them until it is restarted.
            logger.warning(
                "stored vectors are %s, this process embeds with %s: lexical search only "
                "until it is restarted with the new THREADLINE_EMBEDDER",
                model,
                self.embedder.name,
            )
            legs = [leg for leg in legs if leg != "dense"]
        sources = ([KB] if knowledge_base else []) + ([ATTACHMENTS] if attachment_ids else [])
        searches = [
            _Search(
                repository=repository,
                query=query,
                vector=None,
                attachment_ids=attachment_ids,
                exact_kb=searchable <= settings.exact_scan_max_chunks,
                limit=settings.candidates,
                title_weight=settings.title_weight,
            )
            for query in queries
        ]
        found: list[dict[str, list[Hit]]] = [{} for _ in queries]
        # Leg by leg, every query's lexical leg first: they all run while the queries are
        # still being embedded.
        for leg in sorted(legs, key=lambda leg: leg != "lexical"):
            for index, search in enumerate(searches):
                if leg == "dense" and embedding is not None:
                    search = searches[index] = replace(
                        search, vector=list((await embedding)[index])
                    )
                hits: list[Hit] = []
                for source in sources:
                    hits += await _LEGS[leg](search, source)
                hits.sort(key=lambda h: -h.passage.score)
                found[index][leg] = hits[: settings.candidates]
        per_query: list[dict[str, list[Hit]]] = []
        for search, by_any in zip(searches, found, strict=True):
            by_leg: dict[str, list[Hit]] = {leg: by_any[leg] for leg in legs}  # as asked for
            if settings.complete_scores and settings.method == "zscore" and len(by_leg) == 2:
                await _complete(search, sources, by_leg)
            per_query.append(by_leg)
        return per_query
