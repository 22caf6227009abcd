"""Filtered ANN at scale: p95 latency, recall@10 against exact search, short result sets.

    python -m bench.retrieval_scale --chunks 100000 --tenants 1
    python -m bench.retrieval_scale --chunks 1000000 --tenants 100

Synthetic 384-dimensional vectors (clustered, normalised) are loaded with COPY, the HNSW index
is built, then the product's own dense retrieval (app role, RLS, iterative scans) is timed per
tenant and compared with an exact scan of the same tenant (the baseline, measured in the same
run). Tenants are sized unevenly (Zipf): the smallest hold well under 0.1% of the rows.
Targets: p95 <= 20 ms, recall@10 >= 0.95, zero short result sets.

With `--collections N` (default 10) each tenant's chunks are spread over N collections (one
document each), and every query runs twice in the same run: unscoped (the caller sees every
collection) and scoped (the caller sees one in ten, `threadline.collections`: the query's
filter and the RLS policy, ADR 0078), each against its own exact baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bench.common import bench_database, percentile, sized_shared_buffers

DIM = 384
COLUMNS = ["tenant_id", "id", "document_id", "ordinal", "text", "token_count", "embedding"]


def tenant_sizes(total: int, tenants: int) -> list[int]:
    if tenants == 1:
        return [total]
    weights = np.array([1 / (rank**1.2) for rank in range(1, tenants + 1)])
    sizes = np.maximum(20, (weights / weights.sum() * total).astype(int))
    return [int(s) for s in sizes]


def vectors(count: int, centroids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    picks = centroids[rng.integers(0, len(centroids), count)]
    points = picks + rng.normal(0, 0.35, (count, DIM)).astype(np.float32)
    normalised: np.ndarray = (points / np.linalg.norm(points, axis=1, keepdims=True)).astype(
        np.float32
    )
    return normalised


async def run(
    owner_url: str,
    total: int,
    tenants: int,
    queries: int,
    collections: int = 10,
    reuse: bool = False,
) -> None:
    import asyncpg
    from pgvector.asyncpg import register_vector

    from app.config import Settings
    from app.core import migrate
    from app.core.database_urls import libpq_url, resolve_database_urls
    from app.core.db import (
        create_engine,
        create_sessionmaker,
        restrict_to_collections,
        scope_to_tenant,
    )
    from app.embeddings.hashing import HashingEmbedder
    from app.retrieval.hybrid import FusionSettings, HybridRetriever
    from app.retrieval.tenant_indexes import maintenance, repository

    settings = Settings(database_url=owner_url)
    urls = resolve_database_urls(settings)
    await migrate.upgrade(settings, urls.owner)
    rng = np.random.default_rng(7)
    centroids = rng.normal(0, 1, (256, DIM)).astype(np.float32)
    owner = await asyncpg.connect(libpq_url(urls.owner))
    await register_vector(owner)
    corpus = await _loaded(owner) if reuse else None
    if corpus is None:
        corpus = await _load(owner, total, tenants, collections, centroids, rng)
    ids, sizes, shelves = corpus.ids, corpus.sizes, corpus.shelves
    buffers = await owner.fetchval("SHOW shared_buffers")
    print(f"  (shared_buffers {buffers})")
    # The large tenants' own HNSW indexes, as the API process's timer builds them (ADR 0095).
    started = time.perf_counter()
    owner_engine = create_engine(urls.owner, pool_size=1, max_overflow=0)
    try:
        await maintenance.ensure(owner_engine, settings.retrieval_tenant_index_min_chunks, "2GB")
    finally:
        await owner_engine.dispose()
    covered = await owner.fetch(
        "SELECT s.chunks FROM kb_corpus_stats s JOIN pg_class c "
        "ON c.relname = $1 || replace(s.tenant_id::text, '-', '') "
        "JOIN pg_index i ON i.indexrelid = c.oid AND i.indisvalid",
        repository.PREFIX,
    )
    print(
        f"  tenants with an HNSW index of their own: {len(covered)} "
        f"({sum(r['chunks'] for r in covered)} chunks; "
        f">= {settings.retrieval_tenant_index_min_chunks} chunks and <= half of all), "
        f"ready after {time.perf_counter() - started:.0f} s"
    )

    order = sorted(range(len(sizes)), key=lambda i: -sizes[i])
    chosen = order if len(order) <= 6 else [*order[:2], order[len(order) // 2], *order[-3:]]
    engine = create_engine(urls.app)
    sessions = create_sessionmaker(engine)
    retriever = HybridRetriever(HashingEmbedder(), FusionSettings.from_settings(settings))
    per_query = max(1, queries // len(chosen))
    runs = {"unscoped": _Run(), "scoped": _Run()}
    for index in chosen:
        tenant, size, shelf = ids[index], sizes[index], shelves[index]
        # Unscoped: every collection of the tenant; scoped: one in ten of them.
        seen = {"unscoped": shelf, "scoped": shelf[: max(1, len(shelf) // 10)]}
        for query in vectors(per_query, centroids, rng):
            vector = [float(x) for x in query]
            for name, visible in seen.items():
                async with sessions() as db, db.begin():
                    await scope_to_tenant(db, tenant)
                    await restrict_to_collections(db, visible)
                    retriever.embedder = _Fixed(vector)
                    t0 = time.perf_counter()
                    # The dense leg's own ranking: with several documents a tenant, the
                    # fusion ranks chunks by their document, not by distance.
                    (legs,) = await retriever.query_legs(db, tenant, ["q"], legs=("dense",))
                    hits = legs["dense"][:10]
                    runs[name].ann_ms.append((time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()
                async with owner.transaction():
                    await owner.execute("SET LOCAL enable_indexscan = off")
                    rows = await owner.fetch(
                        "SELECT id FROM kb_chunks WHERE tenant_id = $1 "
                        "AND collection_id = ANY($3::uuid[]) "
                        "ORDER BY embedding <=> $2 LIMIT 10",
                        tenant,
                        query,
                        visible,
                    )
                runs[name].exact_ms.append((time.perf_counter() - t0) * 1000)
                truth = {str(r["id"]) for r in rows}
                found = {h.passage.id for h in hits}
                expected = min(10, len(truth))
                runs[name].short += len(found) < expected
                allowed = {str(v) for v in visible}  # one document per collection, same id
                runs[name].outside += sum(1 for h in hits if h.passage.source_id not in allowed)
                runs[name].recalls.append(len(found & truth) / max(expected, 1))
        for name, result in runs.items():
            mine = result.ann_ms[-per_query:]
            print(
                f"  tenant with {size:>7} chunks ({100 * size / sum(sizes):6.3f} %), {name:>8}: "
                f"p50 {statistics.median(mine):6.2f} ms   p95 {percentile(mine, 95):6.2f} ms"
            )
    await engine.dispose()
    await owner.close()
    for name, result in runs.items():
        print(
            f"  {name}: product ANN (HNSW, iterative scan)  p50 "
            f"{statistics.median(result.ann_ms):6.2f} ms   p95 "
            f"{percentile(result.ann_ms, 95):6.2f} ms   (target p95 <= 20 ms)"
        )
        print(
            f"  {name}: baseline exact scan                 p50 "
            f"{statistics.median(result.exact_ms):6.2f} ms   p95 "
            f"{percentile(result.exact_ms, 95):6.2f} ms"
        )
        print(
            f"  {name}: recall@10 {statistics.mean(result.recalls):.3f} (target >= 0.95)   "
            f"short result sets {result.short} of {len(result.recalls)} (target 0)   "
            f"hits outside the visible collections {result.outside} (target 0)"
        )


@dataclass
class _Corpus:
    """The loaded tenants: their ids, chunk counts and collections (one document each)."""

    ids: list[uuid.UUID]
    sizes: list[int]
    shelves: list[list[uuid.UUID]]


async def _load(
    owner: Any,
    total: int,
    tenants: int,
    collections: int,
    centroids: np.ndarray,
    rng: np.random.Generator,
) -> _Corpus:
    """Load `total` chunks over `tenants` with COPY, then build the HNSW index once."""
    sizes = tenant_sizes(total, tenants)
    corpus = _Corpus(
        ids=[uuid.uuid4() for _ in sizes],
        sizes=sizes,
        shelves=[[uuid.uuid4() for _ in range(collections)] for _ in sizes],
    )
    started = time.perf_counter()
    await owner.execute("DROP INDEX IF EXISTS ix_kb_chunks_embedding_hnsw")
    for tenant, shelf, size in zip(corpus.ids, corpus.shelves, sizes, strict=True):
        await owner.execute(
            "INSERT INTO tenants (id, name) VALUES ($1, $2)", tenant, f"t-{tenant.hex[:8]}"
        )
        for n, collection in enumerate(shelf):  # one collection, one document each
            await owner.execute(
                "INSERT INTO kb_collections (tenant_id, id, name, visibility) "
                "VALUES ($1, $2, $3, 'groups')",
                tenant,
                collection,
                f"c{n}",
            )
            # chunk_count as ingestion leaves it: the chunks of the document, ready.
            await owner.execute(
                "INSERT INTO kb_documents (tenant_id, id, title, content_hash, status, "
                "collection_id, chunk_count) VALUES ($1, $2, 'synthetic', $3, 'ready', $2, $4)",
                tenant,
                collection,
                f"{tenant.hex}-{n}",
                len(range(n, size, collections)),
            )
        data = vectors(size, centroids, rng)
        # The chunks' collection_id is set by the insert trigger (migration 0031).
        await owner.copy_records_to_table(
            "kb_chunks",
            columns=COLUMNS,
            records=[
                (tenant, uuid.uuid4(), shelf[i % collections], i, "", 0, data[i])
                for i in range(size)
            ],
        )
    loaded = time.perf_counter() - started
    started = time.perf_counter()
    await owner.execute("SET maintenance_work_mem = '2GB'")
    await owner.execute(
        "CREATE INDEX ix_kb_chunks_embedding_hnsw ON kb_chunks "
        "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
    )
    await owner.execute("ANALYZE kb_chunks")
    await owner.execute("ANALYZE kb_documents")
    built = time.perf_counter() - started
    print(
        f"\n{sum(sizes)} chunks in {len(sizes)} tenants: loaded {loaded:.0f} s, HNSW {built:.0f} s"
    )
    return corpus


async def _loaded(owner: Any) -> _Corpus | None:
    """The corpus an earlier `--reuse` run left in this database (None: nothing yet)."""
    rows = await owner.fetch(
        "SELECT t.id, (SELECT count(*) FROM kb_chunks c WHERE c.tenant_id = t.id) AS size, "
        "ARRAY(SELECT k.id FROM kb_collections k WHERE k.tenant_id = t.id "
        "      ORDER BY length(k.name), k.name) AS shelf "
        "FROM tenants t WHERE t.name LIKE 't-%' ORDER BY t.name"
    )
    if not rows:
        return None
    print(f"\nreusing the {sum(r['size'] for r in rows)} chunks in {len(rows)} tenants loaded")
    return _Corpus(
        ids=[r["id"] for r in rows],
        sizes=[int(r["size"]) for r in rows],
        shelves=[list(r["shelf"]) for r in rows],
    )


@dataclass
class _Run:
    """One kind of query's measurements."""

    ann_ms: list[float] = field(default_factory=list)
    exact_ms: list[float] = field(default_factory=list)
    recalls: list[float] = field(default_factory=list)
    short: int = 0
    outside: int = 0


class _Fixed:
    """An 'embedder' that returns the benchmark's query vector."""

    name = "fixed"
    max_input_tokens: int | None = None
    dimension = DIM

    def __init__(self, vector: list[float]) -> None:
        self.vector = vector

    async def embed(self, texts: object) -> list[list[float]]:
        return [self.vector]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--tenants", type=int, default=1)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument(
        "--collections", type=int, default=10, help="collections per tenant (one document each)"
    )
    parser.add_argument(
        "--shared-buffers",
        default=sized_shared_buffers(),
        help="the embedded server's buffer cache (default: a quarter of the memory, <= 8 GB)",
    )
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="with BENCH_DATABASE_URL: query the corpus an earlier --reuse run loaded there "
        "(loading 1M chunks and building their index takes a quarter of an hour)",
    )
    args = parser.parse_args()
    with bench_database(args.shared_buffers) as owner_url:
        asyncio.run(
            run(owner_url, args.chunks, args.tenants, args.queries, args.collections, args.reuse)
        )


if __name__ == "__main__":
    main()
