"""Ingestion throughput through the product's own path, beside the bare embedder.

    python -m bench.ingestion [--docs 500] [--embedder hashing|minilm]

Both run in the same process on the same texts (SciFact abstracts from ../shared/data): the
bare embedder embeds the chunks in batches of 64; the product path adds each document through
the knowledge-base service and runs the ingestion pipeline (extract, neutralise, chunk, embed,
index, status and progress). Target: the product path at >= 90% of the bare embedder.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from pathlib import Path

from bench.common import ROOT, bench_database

CORPUS = ROOT.parent / "shared" / "data" / "scifact-dev" / "corpus.jsonl"


def load_texts(limit: int) -> list[tuple[str, str]]:
    texts = []
    with Path(CORPUS).open() as corpus:
        for line in corpus:
            doc = json.loads(line)
            texts.append((doc["_id"], f"{doc['title']}\n\n{doc['text']}"))
            if len(texts) == limit:
                break
    return texts


async def run(owner_url: str, docs: int, embedder_name: str, concurrency: int) -> None:
    from app.config import Settings
    from app.core import migrate
    from app.core.database_urls import resolve_database_urls
    from app.core.db import create_engine, create_sessionmaker, scope_to_tenant
    from app.embeddings.factory import build_embedder
    from app.ingestion.chunking import chunk_text
    from app.ingestion.pipeline import IngestionDeps, ingest
    from app.ingestion.uploads import from_bytes
    from app.knowledge.service import add_document
    from app.tenants.service import create_tenant

    settings = Settings(database_url=owner_url, embedder=embedder_name)
    urls = resolve_database_urls(settings)
    await migrate.upgrade(settings, urls.owner)
    engine = create_engine(urls.app)
    sessions = create_sessionmaker(engine)
    embedder = build_embedder(settings)
    texts = load_texts(docs)

    deps = IngestionDeps(sessionmaker=sessions, embedder=embedder, pii_anonymize=False)
    # The same chunks the product makes (sized to what the embedder reads whole).
    chunks = [
        c.text
        for _, text in texts
        for c in chunk_text(text, max_tokens=deps.chunk_tokens, overlap_tokens=deps.chunk_overlap)
    ]
    await embedder.embed(chunks[:64])  # warm-up (model load, caches)
    bare_by_batch: dict[int, float] = {}
    for size in (16, 64):  # the baseline is the bare embedder at its better batch size
        started = time.perf_counter()
        for start in range(0, len(chunks), size):
            await embedder.embed(chunks[start : start + size])
        bare_by_batch[size] = len(chunks) / (time.perf_counter() - started)
    best_batch = max(bare_by_batch, key=lambda size: bare_by_batch[size])
    bare = bare_by_batch[best_batch]

    async with sessions() as db, db.begin():
        tenant = await create_tenant(db, f"ingest-{uuid.uuid4().hex[:6]}")
    limiter = asyncio.Semaphore(concurrency)
    indexed = 0

    async def one(external_id: str, text: str) -> None:
        nonlocal indexed
        async with limiter:
            async with sessions() as db, db.begin():
                await scope_to_tenant(db, tenant.id)
                document, _ = await add_document(
                    db, tenant.id, from_bytes(text.encode(), None), title=external_id,
                    external_id=external_id, metadata={}, created_by=None, enqueue=False,
                )  # fmt: skip
            assert await ingest(deps, "kb", tenant.id, document.id) == "ready"
            indexed += 1

    started = time.perf_counter()
    await asyncio.gather(*(one(i, t) for i, t in texts))
    product = len(chunks) / (time.perf_counter() - started)
    await engine.dispose()
    print(f"\nIngestion throughput ({embedder.name}, {indexed} documents, {len(chunks)} chunks)")
    for size, rate in bare_by_batch.items():
        print(f"  bare embedder (batches of {size:>2})   {rate:9.1f} chunks/s")
    print(f"  product path (concurrency {concurrency})   {product:9.1f} chunks/s")
    print(f"  ratio to the better bare run    {100 * product / bare:9.1f} %   (target >= 90 %)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=500)
    parser.add_argument("--embedder", default="hashing", choices=["hashing", "minilm"])
    parser.add_argument("--concurrency", type=int, default=16)  # as `threadline ingest`
    args = parser.parse_args()
    with bench_database() as owner_url:
        asyncio.run(run(owner_url, args.docs, args.embedder, args.concurrency))


if __name__ == "__main__":
    main()
