"""Shared embedding batches for concurrent ingestions.

A document of one or two chunks would otherwise reach the model as a batch of one or two,
and a CPU model (or a remote API, per request) does far less work per second on tiny
batches. `CoalescingEmbedder` runs one model call at a time; texts that arrive while it is
busy wait and go together in the next call (up to `max_batch`). No timer: an idle embedder
answers at once, a busy one batches by itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from app.embeddings.base import Embedder


@dataclass
class _Request:
    texts: list[str]
    result: asyncio.Future[list[list[float]]]


class CoalescingEmbedder:
    def __init__(self, inner: Embedder, max_batch: int = 64) -> None:
        self.inner = inner
        self.name = inner.name
        self.dimension = inner.dimension
        self.max_input_tokens = inner.max_input_tokens
        self.max_batch = max_batch
        self._queue: list[_Request] = []
        self._worker: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new event loop (tests, a worker's task): start afresh
            self._loop, self._queue, self._worker = loop, [], None
        request = _Request(list(texts), loop.create_future())
        self._queue.append(request)
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._drain())
        return await request.result

    def _next_batch(self) -> list[_Request]:
        batch = [self._queue.pop(0)]  # a request larger than max_batch goes alone
        size = len(batch[0].texts)
        while self._queue and size + len(self._queue[0].texts) <= self.max_batch:
            size += len(self._queue[0].texts)
            batch.append(self._queue.pop(0))
        return batch

    async def _drain(self) -> None:
        while self._queue:
            batch = [r for r in self._next_batch() if not r.result.done()]  # skip cancelled
            if not batch:
                continue
            try:
                vectors = await self.inner.embed([t for r in batch for t in r.texts])
            except Exception as exc:  # every waiter of this batch learns why
                for request in batch:
                    if not request.result.done():
                        request.result.set_exception(exc)
                continue
            except BaseException:  # cancelled: no waiter may hang
                for request in [*batch, *self._queue]:
                    if not request.result.done():
                        request.result.cancel()
                self._queue.clear()
                raise
            offset = 0
            for request in batch:
                count = len(request.texts)
                if not request.result.done():
                    request.result.set_result(vectors[offset : offset + count])
                offset += count
