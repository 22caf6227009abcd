"""Ingestion throughput through the product's own path, beside the bare embedder.

    python -m bench.ingestion [--docs 500] [--embedder onnx|hashing|minilm]

Both run in the same process on the same texts (SciFact abstracts from ../shared/data): the
bare embedder embeds the product's chunks in batches of 16 and of 64 (the better one is the
baseline); the product path adds each document through the knowledge-base service and runs the
ingestion pipeline (extract, neutralise, chunk, embed, index, status and progress), as many
documents at once as `threadline ingest`. Order: bare, product, product, bare again; the ratio
is of the means. Target: the product path at >= 90% of the bare embedder.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
import uuid
from pathlib import Path

from app.cli.ingest import INGEST_CONCURRENCY, INGEST_CONNECTIONS  # as `threadline ingest`
from bench.common import ROOT, bench_database
from bench.product_store import add_and_ingest, open_product_store

# ../shared/data beside the checkout; SCIFACT_DIR elsewhere (a worktree, /work/shared/...).
SCIFACT = Path(os.environ.get("SCIFACT_DIR", ROOT.parent / "shared" / "data" / "scifact-dev"))
CORPUS = SCIFACT / "corpus.jsonl"


def load_documents(limit: int) -> list[tuple[str, str, str]]:
    """SciFact abstracts as (id, title, text): titles go in as titles, not folded in."""
    documents = []
    with Path(CORPUS).open() as corpus:
        for line in corpus:
            doc = json.loads(line)
            documents.append((doc["_id"], doc["title"], doc["text"]))
            if len(documents) == limit:
                break
    return documents


async def run(owner_url: str, docs: int, embedder_name: str, concurrency: int) -> None:
    from app.embeddings.base import document_input
    from app.ingestion.chunking import chunk_text
    from app.tenants.service import create_tenant

    store = await open_product_store(
        owner_url, embedder_name, pool_size=INGEST_CONNECTIONS, max_overflow=0
    )
    sessions, embedder, deps = store.sessions, store.embedder, store.deps
    texts = load_documents(docs)

    # The same chunks the product makes (sized to what the embedder reads whole), titled.
    chunks = [
        document_input(title, c.text)
        for _, title, text in texts
        for c in chunk_text(text, max_tokens=deps.chunk_tokens, overlap_tokens=deps.chunk_overlap)
    ]
    await embedder.embed(chunks[:64])  # warm-up (model load, caches)

    async def bare_rate(size: int) -> float:
        started = time.perf_counter()
        for start in range(0, len(chunks), size):
            await embedder.embed(chunks[start : start + size])
        return len(chunks) / (time.perf_counter() - started)

    async def product_rate() -> float:
        """Every document added and ingested as `threadline ingest` does, into a new tenant."""
        async with sessions() as db, db.begin():
            tenant = await create_tenant(db, f"ingest-{uuid.uuid4().hex[:6]}")
        limiter = asyncio.Semaphore(concurrency)

        async def one(external_id: str, title: str, text: str) -> None:
            async with limiter:
                _, status = await add_and_ingest(
                    store, tenant.id, text, title=title, external_id=external_id
                )
                assert status == "ready", status

        started = time.perf_counter()
        await asyncio.gather(*(one(*document) for document in texts))
        return len(chunks) / (time.perf_counter() - started)

    # Bare, product, product, bare: a machine that speeds up or slows down during the run
    # (this one drifts by 10% in minutes) moves both sides alike instead of one.
    bare_by_batch = {size: await bare_rate(size) for size in (16, 64)}
    best_batch = max(bare_by_batch, key=lambda size: bare_by_batch[size])  # the better batch
    products = [await product_rate(), await product_rate()]
    bares = [bare_by_batch[best_batch], await bare_rate(best_batch)]
    await store.engine.dispose()

    bare, product = statistics.mean(bares), statistics.mean(products)
    print(f"\nIngestion throughput ({embedder.name}, {len(texts)} documents, {len(chunks)} chunks)")
    for size, rate in bare_by_batch.items():
        print(f"  bare embedder (batches of {size:>2})     {rate:9.1f} chunks/s")
    print(f"  bare embedder again (batches of {best_batch}) {bares[1]:7.1f} chunks/s")
    for rate in products:
        print(f"  product path (concurrency {concurrency})     {rate:9.1f} chunks/s")
    print(f"  ratio of the means                {100 * product / bare:9.1f} %   (target >= 90 %)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=500)
    parser.add_argument("--embedder", default="onnx", choices=["onnx", "hashing", "minilm"])
    parser.add_argument("--concurrency", type=int, default=INGEST_CONCURRENCY)
    args = parser.parse_args()
    with bench_database() as owner_url:
        asyncio.run(run(owner_url, args.docs, args.embedder, args.concurrency))


if __name__ == "__main__":
    main()
