"""Hybrid retrieval: pgvector HNSW (cosine) + PostgreSQL full text, fused (z-scores by default,
or reciprocal rank).

Both legs are filtered to the tenant in SQL (and by RLS). The knowledge base's lexical leg is
scored by BM25 (term statistics per tenant, kept by triggers); attachments, a handful of
documents, use `ts_rank_cd`. The HNSW index is shared by all
tenants, so a filtered nearest-neighbour search could come back short for a small tenant;
pgvector 0.8's iterative index scans (`hnsw.iterative_scan = relaxed_order`) keep scanning
until the filter has let through enough rows, and the query orders the survivors exactly.

Over 300 lines until its SQL and orchestration are separated (issue 14 asks for it).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from sqlalchemy import ColumnElement, Float, cast, func, literal, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.embeddings.base import Embedder
from app.models import Attachment, AttachmentChunk, KbChunk, KbDocument
from app.retrieval.base import Passage
from app.retrieval.fusion import FusionMethod, fuse

Leg = Literal["dense", "lexical"]
MAX_SCAN_TUPLES = 1_000_000
BM25_K1 = 1.2
BM25_B = 0.75

_BM25 = text(
    """
    WITH terms AS (
      SELECT DISTINCT t.lexeme
      FROM unnest(tsvector_to_array(to_tsvector('english', :query))) AS t(lexeme)
    ),
    corpus AS (
      SELECT chunks::float8 AS n,
             greatest(total_length::float8 / nullif(chunks, 0), 1) AS avgdl
      FROM kb_corpus_stats WHERE tenant_id = :tenant
    ),
    idf AS (
      SELECT s.lexeme, ln(1 + (corpus.n - s.df + 0.5) / (s.df + 0.5)) AS idf
      FROM kb_term_stats s JOIN terms USING (lexeme) CROSS JOIN corpus
      WHERE s.tenant_id = :tenant
    ),
    matches AS (
      SELECT c.id, c.document_id, c.text, c.tsv, d.title, d.external_id
      FROM kb_chunks c
      JOIN kb_documents d ON d.tenant_id = c.tenant_id AND d.id = c.document_id
      WHERE c.tenant_id = :tenant AND d.status = 'ready'
        AND c.tsv @@ websearch_to_tsquery('english', :words)
    )
    SELECT m.id, m.document_id AS parent_id, m.title, m.external_id, m.text,
           sum(idf.idf * cardinality(u.positions) * (:k1 + 1)
               / (cardinality(u.positions)
                  + :k1 * (1 - :b + :b * length(m.tsv) / corpus.avgdl))) AS score
    FROM matches m
    CROSS JOIN LATERAL unnest(m.tsv) AS u(lexeme, positions, weights)
    JOIN idf ON idf.lexeme = u.lexeme
    CROSS JOIN corpus
    GROUP BY m.id, m.document_id, m.title, m.external_id, m.text
    ORDER BY score DESC, m.id
    LIMIT :limit
    """
)


# One round trip before the legs: the search settings of this transaction (SET LOCAL), and
# the size of the tenant's knowledge base, which decides exact scan or HNSW.
# `max_scan_tuples`: how far an iterative scan may go to fill a filtered result, so a tenant
# with a tiny share of the rows still gets its full candidate list.
_PREPARE_SEARCH = text(
    """
    SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true),
           set_config('hnsw.ef_search', :ef_search, true),
           set_config('hnsw.max_scan_tuples', :max_scan_tuples, true),
           (SELECT chunks FROM kb_corpus_stats WHERE tenant_id = :tenant) AS kb_chunks
    """
)


@dataclass(frozen=True)
class FusionSettings:
    candidates: int = 40
    method: FusionMethod = "zscore"
    k: int = 60
    """The reciprocal-rank constant (method `rrf`)."""
    dense_weight: float = 1.0
    lexical_weight: float = 1.0
    ef_search: int = 100
    exact_scan_max_chunks: int = 10_000
    """A knowledge base this small is searched exactly (its rows through the tenant's btree,
    sorted by distance) instead of through the shared HNSW index."""

    @classmethod
    def from_settings(cls, settings: Settings) -> FusionSettings:
        return cls(
            candidates=settings.retrieval_candidates,
            method=settings.retrieval_fusion,
            k=settings.retrieval_fusion_k,
            dense_weight=settings.retrieval_dense_weight,
            lexical_weight=settings.retrieval_lexical_weight,
            ef_search=settings.hnsw_ef_search,
            exact_scan_max_chunks=settings.retrieval_exact_scan_max_chunks,
        )


@dataclass(frozen=True)
class Hit:
    passage: Passage
    external_id: str | None

    @property
    def chunk_id(self) -> str:
        return self.passage.id

    @property
    def document_key(self) -> str:
        return f"{self.passage.kind}:{self.passage.source_id}"

    @property
    def score(self) -> float:
        return self.passage.score


@dataclass(frozen=True)
class _Source:
    """One searchable table: chunks, their parent, and how to present a hit."""

    kind: Literal["kb", "attachment"]
    chunk: Any
    parent: Any
    parent_id: Any
    title: Any
    external_id: Any
    ready: Any


KB = _Source(
    "kb", KbChunk, KbDocument, KbChunk.document_id, KbDocument.title, KbDocument.external_id,
    KbDocument.status == "ready",
)  # fmt: skip
ATTACHMENTS = _Source(
    "attachment", AttachmentChunk, Attachment, AttachmentChunk.attachment_id,
    func.coalesce(Attachment.filename, literal("attachment")), literal(None),
    Attachment.status == "ready",
)  # fmt: skip


_WORDS = re.compile(r"\w+")


def _or_query(query: str) -> ColumnElement[Any]:
    """The question's words OR-ed (an answer rarely repeats every word of its question),
    stemmed once by the `english` configuration. websearch syntax cannot fail to parse."""
    words = _WORDS.findall(query.lower())[:64]
    return func.websearch_to_tsquery("english", " or ".join(words) or "")


class HybridRetriever:
    def __init__(self, embedder: Embedder, settings: FusionSettings) -> None:
        self.embedder = embedder
        self.settings = settings

    async def search(
        self,
        session: AsyncSession,
        tenant_id: uuid.UUID,
        query: str,
        *,
        attachment_ids: Sequence[uuid.UUID],
        k: int,
    ) -> list[Passage]:
        hits = await self.search_hits(session, tenant_id, query, attachment_ids=attachment_ids, k=k)
        return [hit.passage for hit in hits]

    async def search_hits(
        self,
        session: AsyncSession,
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
        prepared = (
            await session.execute(
                _PREPARE_SEARCH,
                {
                    "ef_search": str(int(settings.ef_search)),
                    "max_scan_tuples": str(MAX_SCAN_TUPLES),
                    "tenant": tenant_id,
                },
            )
        ).one()
        exact_kb = (prepared.kb_chunks or 0) <= settings.exact_scan_max_chunks
        vector = (await self.embedder.embed([query]))[0] if "dense" in legs else None
        sources = ([KB] if knowledge_base else []) + ([ATTACHMENTS] if attachment_ids else [])
        weights = {"dense": settings.dense_weight, "lexical": settings.lexical_weight}
        by_leg: dict[str, list[Hit]] = {}
        for leg in legs:
            hits: list[Hit] = []
            for source in sources:
                hits += await self._leg(
                    session, source, leg, tenant_id, query, vector, attachment_ids, exact_kb
                )
            hits.sort(key=lambda h: -h.passage.score)
            by_leg[leg] = hits[: settings.candidates]
        fused = fuse(by_leg, weights, method=settings.method, rrf_k=settings.k, limit=k)
        found = {hit.chunk_id: hit for hits in by_leg.values() for hit in hits}
        return [
            replace(found[f.chunk_id], passage=replace(found[f.chunk_id].passage, score=f.score))
            for f in fused
        ]

    async def _kb_bm25(self, session: AsyncSession, tenant_id: uuid.UUID, query: str) -> list[Hit]:
        """The knowledge base's lexical leg, scored by BM25 from the per-tenant term
        statistics (migration 0010) rather than ts_rank, which has no notion of rarity."""
        words = " or ".join(_WORDS.findall(query.lower())[:64])
        rows = (
            await session.execute(
                _BM25,
                {
                    "tenant": tenant_id,
                    "query": query,
                    "words": words,
                    "k1": BM25_K1,
                    "b": BM25_B,
                    "limit": self.settings.candidates,
                },
            )
        ).all()
        return [
            Hit(
                Passage(
                    id=str(r.id),
                    kind="kb",
                    source_id=str(r.parent_id),
                    title=r.title,
                    text=r.text,
                    score=float(r.score),
                ),
                r.external_id,
            )
            for r in rows
        ]

    async def _leg(
        self,
        session: AsyncSession,
        source: _Source,
        leg: Leg,
        tenant_id: uuid.UUID,
        query: str,
        vector: list[float] | None,
        attachment_ids: Sequence[uuid.UUID],
        exact_kb: bool,
    ) -> list[Hit]:
        if leg == "lexical" and source.kind == "kb":
            return await self._kb_bm25(session, tenant_id, query)
        chunk, parent = source.chunk, source.parent
        limit = self.settings.candidates
        if leg == "dense":
            # Nearest chunks first, from the chunk table alone (the shape the HNSW index
            # serves, iterative scans included); documents and text joined to the few found.
            distance = chunk.embedding.cosine_distance(vector)
            if source.kind == "attachment" or exact_kb:
                # A session's attachments, or a small knowledge base, are a sliver of the
                # shared index: an iterative scan would walk past thousands of other tenants'
                # rows to collect them, an exact scan reads only theirs. `+ 0` hides the
                # distance from the HNSW index, so the planner takes the btree and sorts.
                distance = distance + 0
            nearest_query = select(
                chunk.id.label("id"),
                source.parent_id.label("parent_id"),
                distance.label("distance"),
            ).where(chunk.tenant_id == tenant_id, chunk.embedding.is_not(None))
            if source.kind == "attachment":
                nearest_query = nearest_query.where(source.parent_id.in_(list(attachment_ids)))
            nearest = (nearest_query.order_by(distance).limit(limit).cte("nearest")).prefix_with(
                "MATERIALIZED"
            )
            statement = (
                select(
                    chunk.id,
                    nearest.c.parent_id,
                    source.title.label("title"),
                    source.external_id.label("external_id"),
                    chunk.text,
                    (1 - nearest.c.distance).label("score"),
                )
                .select_from(nearest)
                .join(chunk, (chunk.tenant_id == tenant_id) & (chunk.id == nearest.c.id))
                .join(parent, (parent.tenant_id == tenant_id) & (parent.id == nearest.c.parent_id))
                .where(source.ready)
                .order_by(nearest.c.distance)
                .limit(limit)
            )
        else:
            tsquery = _or_query(query)
            score = cast(func.ts_rank_cd(chunk.tsv, tsquery, 32), Float)
            statement = (
                select(
                    chunk.id,
                    source.parent_id.label("parent_id"),
                    source.title.label("title"),
                    source.external_id.label("external_id"),
                    chunk.text,
                    score.label("score"),
                )
                .join(
                    parent, (parent.tenant_id == chunk.tenant_id) & (parent.id == source.parent_id)
                )
                .where(chunk.tenant_id == tenant_id, source.ready, chunk.tsv.op("@@")(tsquery))
                .order_by(score.desc())
                .limit(limit)
            )
            if source.kind == "attachment":
                statement = statement.where(source.parent_id.in_(list(attachment_ids)))
        rows = (await session.execute(statement)).all()
        return [
            Hit(
                Passage(
                    id=str(r.id),
                    kind=source.kind,
                    source_id=str(r.parent_id),
                    title=r.title,
                    text=r.text,
                    score=float(r.score),
                ),
                r.external_id,
            )
            for r in rows
        ]
