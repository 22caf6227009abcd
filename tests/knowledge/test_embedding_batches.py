"""Concurrent ingestions share the embedder's batches, and each gets its own vectors back."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from app.embeddings.batching import CoalescingEmbedder
from app.embeddings.hashing import HashingEmbedder


class CountingEmbedder:
    """The real hashing embedder, slowed a little so callers pile up, recording batch sizes."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.inner = HashingEmbedder()
        self.name, self.dimension = self.inner.name, self.inner.dimension
        self.max_input_tokens = self.inner.max_input_tokens
        self.batches: list[int] = []
        self.fail_on = fail_on

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.batches.append(len(texts))
        await asyncio.sleep(0.01)
        if self.fail_on in texts:
            raise RuntimeError("model failure")
        return await self.inner.embed(texts)


async def test_concurrent_calls_share_batches_and_get_their_own_vectors() -> None:
    counting = CountingEmbedder()
    batcher = CoalescingEmbedder(counting, max_batch=8)
    documents = [[f"doc {d} chunk {c}" for c in range(1 + d % 3)] for d in range(12)]

    results = await asyncio.gather(*(batcher.embed(texts) for texts in documents))

    expected = [await HashingEmbedder().embed(texts) for texts in documents]
    assert results == expected
    assert sum(counting.batches) == sum(len(t) for t in documents)
    assert max(counting.batches) <= 8
    assert len(counting.batches) < len(documents) / 2  # batched, not one call per document


async def test_a_failed_batch_fails_its_callers_only() -> None:
    counting = CountingEmbedder(fail_on="poison")
    batcher = CoalescingEmbedder(counting, max_batch=2)
    first = asyncio.ensure_future(batcher.embed(["fine"]))
    await asyncio.sleep(0)  # the first call is in flight alone
    poisoned = asyncio.ensure_future(batcher.embed(["poison", "x"]))
    later = asyncio.ensure_future(batcher.embed(["after"]))

    assert len((await first)[0]) == counting.dimension
    with pytest.raises(RuntimeError, match="model failure"):
        await poisoned
    assert (await later) == await HashingEmbedder().embed(["after"])


async def test_a_cancelled_caller_does_not_block_the_others() -> None:
    batcher = CoalescingEmbedder(CountingEmbedder(), max_batch=4)
    busy = asyncio.ensure_future(batcher.embed(["busy"]))
    await asyncio.sleep(0)
    abandoned = asyncio.ensure_future(batcher.embed(["abandoned"]))
    kept = asyncio.ensure_future(batcher.embed(["kept"]))
    await asyncio.sleep(0)
    abandoned.cancel()

    assert len(await busy) == 1
    assert (await kept) == await HashingEmbedder().embed(["kept"])
    assert abandoned.cancelled()
