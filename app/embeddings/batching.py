"""Shared embedding batches for concurrent ingestions.

A document of one or two chunks would otherwise reach the model as a batch of one or two,
and a CPU model (or a remote API, per request) does far less work per second on tiny
batches. `CoalescingEmbedder` runs one model call at a time; texts that arrive while it is
busy wait and go together in the next call (up to `max_batch` texts).
"""

from __future__ import annotations

from collections.abc import Sequence

from app.core.coalesce import Coalescer
from app.embeddings.base import Embedder


class CoalescingEmbedder:
    """Wraps an embedder so concurrent callers share model calls in larger batches."""

    def __init__(self, inner: Embedder, max_batch: int = 64) -> None:
        self.inner = inner
        self.name = inner.name
        self.dimension = inner.dimension
        self.max_input_tokens = inner.max_input_tokens
        self._calls = Coalescer[list[str], list[list[float]]](
            self._embed_together, max_size=max_batch, size=len
        )

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors for these texts, computed in a batch shared with concurrent callers."""
        if not texts:
            return []
        return await self._calls.submit(list(texts))

    async def _embed_together(self, requests: list[list[str]]) -> list[list[list[float]]]:
        vectors = await self.inner.embed([text for texts in requests for text in texts])
        results, offset = [], 0
        for texts in requests:
            results.append(vectors[offset : offset + len(texts)])
            offset += len(texts)
        return results
