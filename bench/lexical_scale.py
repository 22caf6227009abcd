"""The lexical leg and the hybrid search at scale, beside BM25 as it was computed before its
inverted index (ADR 0040), in the same run.

    python -m bench.lexical_scale --chunks 100000 [--queries 200] [--baseline-queries 50]

One tenant's knowledge base of `--chunks` chunks is loaded with COPY, so the triggers build
the term statistics and the postings as ingestion does: each chunk is five sentences drawn
at random from the SciFact abstracts (`../shared/data`), with a synthetic vector (as in
`bench.retrieval_scale`); the HNSW index is built. Then, for SciFact claims, alternated per
claim: the product's lexical leg (BM25 from `kb_term_postings`), the product's hybrid search
(both legs, the claim's lexical query and a synthetic query vector), and the baseline, BM25
over every matching chunk's tsvector (the statement before migration 0021), for the first
`--baseline-queries` claims. The baseline's top 10 and the lexical leg's are compared: the
same scores must give the same chunks.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import time
import uuid

import numpy as np
from sqlalchemy import Float, bindparam, text

from bench.common import bench_database, percentile, sized_shared_buffers
from bench.retrieval_scale import COLUMNS, _Fixed, vectors

# BM25 as the lexical leg computed it before the inverted index: every chunk matching one of
# the words, its whole tsvector unnested and joined with the question's lexemes.
_BM25_OVER_TSVECTORS = text(
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
    SELECT m.id, sum(idf.idf * u.tf * (:k1 + 1)
               / (u.tf + :k1 * (1 - :b + :b * length(m.tsv) / corpus.avgdl))) AS score
    FROM matches m
    CROSS JOIN LATERAL (
      SELECT t.lexeme, cardinality(t.positions)
               + (:title_weight - 1) * cardinality(array_positions(t.weights, 'A')) AS tf
      FROM unnest(m.tsv) AS t(lexeme, positions, weights)
    ) AS u
    JOIN idf ON idf.lexeme = u.lexeme
    CROSS JOIN corpus
    GROUP BY m.id, m.document_id, m.title, m.external_id, m.text
    ORDER BY score DESC, m.id
    LIMIT :limit
    """
).bindparams(*(bindparam(name, type_=Float) for name in ("k1", "b", "title_weight")))


def sentences() -> list[str]:
    """Every sentence of the SciFact abstracts."""
    from bench.ingestion import load_documents

    found: list[str] = []
    for _, _, abstract in load_documents(100_000):
        found += [s for s in re.split(r"(?<=[.!?])\s+", abstract) if len(s.split()) >= 4]
    return found


async def run(owner_url: str, total: int, queries: int, baseline_queries: int) -> None:
    import asyncpg
    from pgvector.asyncpg import register_vector

    from app.config import Settings
    from app.core import migrate
    from app.core.database_urls import libpq_url, resolve_database_urls
    from app.core.db import create_engine, create_sessionmaker, scope_to_tenant
    from app.retrieval.hybrid import FusionSettings, HybridRetriever, Leg
    from app.retrieval.repository import BM25_B, BM25_K1, query_words
    from bench.retrieval_quality import load_queries

    settings = Settings(database_url=owner_url)
    urls = resolve_database_urls(settings)
    await migrate.upgrade(settings, urls.owner)
    rng = np.random.default_rng(11)
    pool = sentences()
    tenant, document = uuid.uuid4(), uuid.uuid4()

    owner = await asyncpg.connect(libpq_url(urls.owner))
    await register_vector(owner)
    started = time.perf_counter()
    await owner.execute("DROP INDEX IF EXISTS ix_kb_chunks_embedding_hnsw")
    await owner.execute("INSERT INTO tenants (id, name) VALUES ($1, 'lexical-scale')", tenant)
    await owner.execute(
        "INSERT INTO kb_documents (tenant_id, id, title, content_hash, status) "
        "VALUES ($1, $2, 'synthetic', 'h', 'ready')",
        tenant,
        document,
    )
    centroids = rng.normal(0, 1, (256, 384)).astype(np.float32)
    batch = 20_000
    for first in range(0, total, batch):
        size = min(batch, total - first)
        data = vectors(size, centroids, rng)
        picks = rng.integers(0, len(pool), (size, 5))
        await owner.copy_records_to_table(
            "kb_chunks",
            columns=COLUMNS,
            records=[
                (
                    tenant,
                    uuid.uuid4(),
                    document,
                    first + i,
                    " ".join(pool[j] for j in picks[i]),
                    0,
                    data[i],
                )
                for i in range(size)
            ],
        )
    loaded = time.perf_counter() - started
    started = time.perf_counter()
    await owner.execute("SET maintenance_work_mem = '1GB'")
    await owner.execute(
        "CREATE INDEX ix_kb_chunks_embedding_hnsw ON kb_chunks "
        "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
    )
    await owner.execute("VACUUM ANALYZE kb_chunks")
    await owner.execute("VACUUM ANALYZE kb_term_postings")
    built = time.perf_counter() - started
    postings = await owner.fetchval("SELECT count(*) FROM kb_term_postings")
    print(
        f"\n{total} chunks in one tenant, {postings} postings: loaded (with the triggers) "
        f"{loaded:.0f} s, HNSW and VACUUM {built:.0f} s"
    )
    await owner.close()

    claims = [claim for _, claim in load_queries(queries)[0]]
    engine = create_engine(urls.app)
    sessions = create_sessionmaker(engine)
    retriever = HybridRetriever(_Fixed([]), FusionSettings.from_settings(settings))
    times: dict[str, list[float]] = {"lexical": [], "hybrid": [], "baseline": []}
    same_top: list[float] = []
    legs: dict[str, tuple[Leg, ...]] = {"lexical": ("lexical",), "hybrid": ("dense", "lexical")}
    for index, (claim, vector) in enumerate(
        zip(claims, vectors(len(claims), centroids, rng), strict=True)
    ):
        retriever.embedder = _Fixed([float(x) for x in vector])
        found: list[str] = []
        for name, chosen in legs.items():
            async with sessions() as db, db.begin():
                await scope_to_tenant(db, tenant)
                began = time.perf_counter()
                hits = await retriever.search_hits(db, tenant, claim, k=10, legs=chosen)
                times[name].append((time.perf_counter() - began) * 1000)
            if name == "lexical":
                found = [h.passage.id for h in hits]
        if index >= baseline_queries:
            continue
        async with sessions() as db, db.begin():
            await scope_to_tenant(db, tenant)
            began = time.perf_counter()
            rows = await db.execute(
                _BM25_OVER_TSVECTORS,
                {
                    "tenant": tenant,
                    "query": claim,
                    "words": query_words(claim),
                    "k1": BM25_K1,
                    "b": BM25_B,
                    "title_weight": retriever.settings.title_weight,
                    "limit": 10,
                },
            )
            times["baseline"].append((time.perf_counter() - began) * 1000)
        expected = [str(row.id) for row in rows]
        same_top.append(len(set(found) & set(expected)) / max(1, len(expected)))
    await engine.dispose()
    print(f"{len(claims)} SciFact claims (baseline: the first {len(times['baseline'])}), ms:")
    for name, label in (
        ("lexical", "lexical leg, inverted index"),
        ("hybrid", "hybrid search (both legs)"),
        ("baseline", "baseline: BM25 over tsvectors"),
    ):
        print(
            f"  {label:<32} p50 {statistics.median(times[name]):8.2f}   "
            f"p95 {percentile(times[name], 95):8.2f}"
        )
    print(f"  the lexical leg's top 10 among the baseline's: {statistics.mean(same_top):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--baseline-queries", type=int, default=50)
    parser.add_argument("--shared-buffers", default=sized_shared_buffers())
    args = parser.parse_args()
    with bench_database(args.shared_buffers) as owner_url:
        asyncio.run(run(owner_url, args.chunks, args.queries, args.baseline_queries))


if __name__ == "__main__":
    main()
