"""Retrieval quality on SciFact (BEIR): nDCG@10 and recall@10, dense vs lexical vs hybrid.

    python -m bench.retrieval_quality [--embedder onnx|hashing|minilm] [--docs N] [--queries N]

The corpus goes in through the product's own ingestion path; the three configurations are the
product's own retriever with one leg, the other, and both fused. Published BEIR nDCG@10 on
SciFact (test split): BM25 0.665, MiniLM dense ~0.645, their RRF ~0.69-0.71.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import time
import uuid
from collections import defaultdict
from dataclasses import replace

from bench.common import bench_database, summary
from bench.ingestion import SCIFACT, load_documents
from bench.product_store import add_and_ingest, open_product_store

DATA = SCIFACT


def load_queries(limit: int) -> tuple[list[tuple[str, str]], dict[str, set[str]]]:
    qrels: dict[str, set[str]] = defaultdict(set)
    with (DATA / "qrels" / "dev.tsv").open() as lines:
        for line in lines:
            parts = line.strip().split("\t")
            if len(parts) == 3 and parts[2].isdigit() and int(parts[2]) > 0:
                qrels[parts[0]].add(parts[1])
    queries = []
    with (DATA / "queries.jsonl").open() as lines:
        for line in lines:
            query = json.loads(line)
            if query["_id"] in qrels:
                queries.append((query["_id"], query["text"]))
    return queries[:limit], qrels


def ndcg_at_10(ranked: list[str], relevant: set[str]) -> float:
    dcg = sum(1 / math.log2(i + 2) for i, doc in enumerate(ranked[:10]) if doc in relevant)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(10, len(relevant))))
    return dcg / ideal if ideal else 0.0


async def run(
    owner_url: str, embedder_name: str, docs: int, queries_limit: int, reuse: str | None = None
) -> None:
    from app.core.db import scope_to_tenant
    from app.retrieval.hybrid import FusionSettings, HybridRetriever, Leg
    from app.tenants.service import create_tenant, require_tenant

    store = await open_product_store(owner_url, embedder_name)
    settings, sessions, embedder = store.settings, store.sessions, store.embedder
    async with sessions() as db, db.begin():
        if reuse:  # a tenant already holding the corpus (--database, --tenant)
            tenant = await require_tenant(db, reuse)
        else:
            tenant = await create_tenant(db, f"scifact-{uuid.uuid4().hex[:6]}")
    limiter = asyncio.Semaphore(4)

    async def one(external_id: str, title: str, text: str) -> None:
        async with limiter:  # the title as the title: both legs index it (migration 0019)
            await add_and_ingest(store, tenant.id, text, title=title, external_id=external_id)

    started = time.perf_counter()
    texts = load_documents(docs)
    if not reuse:
        await asyncio.gather(*(one(*document) for document in texts))
        print(f"ingested {len(texts)} documents in {time.perf_counter() - started:.0f} s")

    queries, qrels = load_queries(queries_limit)
    configured = FusionSettings.from_settings(settings)
    # The configured retrieval, and the hybrid with each leg's scores completed (at 40 and
    # 100 candidates a leg): same run, queries interleaved, so the latency differences are
    # not the machine's mood.
    completed = replace(configured, complete_scores=True, method="zscore")
    configurations: dict[str, tuple[tuple[Leg, ...], FusionSettings]] = {
        "dense": (("dense",), configured),
        "lexical": (("lexical",), configured),
        "hybrid": (("dense", "lexical"), configured),
        "hybrid, scores completed, 40": (("dense", "lexical"), replace(completed, candidates=40)),
        "hybrid, scores completed, 100": (
            ("dense", "lexical"),
            replace(completed, candidates=100),
        ),
    }
    scores: dict[str, list[float]] = defaultdict(list)
    recalls: dict[str, list[float]] = defaultdict(list)
    millis: dict[str, list[float]] = defaultdict(list)
    for query_id, query in queries:
        relevant = qrels[query_id]
        await embedder.embed([query])  # the query's vector cached: timings are the search's
        for name, (legs, fusion) in configurations.items():
            retriever = HybridRetriever(embedder, fusion)
            async with sessions() as db, db.begin():
                await scope_to_tenant(db, tenant.id)
                began = time.perf_counter()
                hits = await retriever.search_hits(db, tenant.id, query, k=30, legs=legs)
                millis[name].append((time.perf_counter() - began) * 1000)
            ranked: list[str] = []
            for hit in hits:  # documents, best chunk first
                if hit.external_id and hit.external_id not in ranked:
                    ranked.append(hit.external_id)
            scores[name].append(ndcg_at_10(ranked, relevant))
            recalls[name].append(len(set(ranked[:10]) & relevant) / len(relevant))
    await store.engine.dispose()
    print(f"\nSciFact ({len(texts)} documents, {len(queries)} queries, embedder {embedder.name})")
    for name in configurations:
        ndcg = sum(scores[name]) / len(scores[name])
        recall = sum(recalls[name]) / len(recalls[name])
        print(f"  {name:<36} nDCG@10 {ndcg:.3f}   recall@10 {recall:.3f}   {summary(millis[name])}")
    print("  target: hybrid nDCG@10 >= 0.75 (dev split)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--embedder", default="onnx", choices=["onnx", "hashing", "minilm"])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--database", help="an owner URL already holding --tenant's corpus")
    parser.add_argument("--tenant", help="the tenant holding the corpus in --database")
    args = parser.parse_args()
    if args.database:
        asyncio.run(run(args.database, args.embedder, args.docs, args.queries, args.tenant))
        return
    with bench_database() as owner_url:
        asyncio.run(run(owner_url, args.embedder, args.docs, args.queries))


if __name__ == "__main__":
    main()
