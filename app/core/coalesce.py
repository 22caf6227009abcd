"""Batch concurrent calls to one expensive handler without a timer.

`Coalescer` runs `handle(items)` one batch at a time: items submitted while a batch is
running wait and go together in the next one (up to `max_size`, measured by `size`). An idle
coalescer starts a batch at once, a busy one batches by itself, so a lone caller never waits
for company. Used for the embedder's calls and the ingestion pipeline's transactions, where
one call for many items costs little more than one for a single item.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


@dataclass
class _Waiting(Generic[T, R]):
    item: T
    result: asyncio.Future[R]


class Coalescer(Generic[T, R]):
    """Runs one expensive handler over batches of concurrently submitted items, without a timer."""

    def __init__(
        self,
        handle: Callable[[list[T]], Awaitable[Sequence[R]]],
        *,
        max_size: int,
        size: Callable[[T], int] = lambda _: 1,
        isolate_failures: bool = False,
    ) -> None:
        """`handle` returns one result per item, in order. With `isolate_failures`, a batch
        that raises is run again item by item, so one bad item fails only its own caller."""
        self._handle = handle
        self._max_size = max_size
        self._size = size
        self._isolate_failures = isolate_failures
        self._queue: list[_Waiting[T, R]] = []
        self._worker: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def submit(self, item: T) -> R:
        """Queue one item for the next batch and wait for its own result."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new event loop (tests, a worker's task): start afresh
            self._loop, self._queue, self._worker = loop, [], None
        waiting = _Waiting[T, R](item, loop.create_future())
        self._queue.append(waiting)
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._drain())
        return await waiting.result

    def _next_batch(self) -> list[_Waiting[T, R]]:
        batch = [self._queue.pop(0)]  # an item larger than max_size goes alone
        total = self._size(batch[0].item)
        while self._queue and total + self._size(self._queue[0].item) <= self._max_size:
            total += self._size(self._queue[0].item)
            batch.append(self._queue.pop(0))
        return batch

    async def _drain(self) -> None:
        while self._queue:
            batch = [w for w in self._next_batch() if not w.result.done()]  # skip cancelled
            if not batch:
                continue
            try:
                await self._run(batch)
            except Exception as exc:  # a broken handler contract: its callers learn why
                _fail(batch, exc)
            except BaseException:  # cancelled: no caller may hang
                for waiting in [*batch, *self._queue]:
                    if not waiting.result.done():
                        waiting.result.cancel()
                self._queue.clear()
                raise

    async def _run(self, batch: list[_Waiting[T, R]]) -> None:
        try:
            results = await self._handle([w.item for w in batch])
        except Exception as exc:
            if not (self._isolate_failures and len(batch) > 1):
                _fail(batch, exc)  # every caller of this batch learns why
                return
            for waiting in batch:
                if not waiting.result.done():  # a caller cancelled meanwhile is not retried
                    await self._run([waiting])
            return
        for waiting, result in zip(batch, results, strict=True):
            if not waiting.result.done():
                waiting.result.set_result(result)


def _fail(batch: list[_Waiting[T, R]], error: Exception) -> None:
    for waiting in batch:
        if not waiting.result.done():
            waiting.result.set_exception(error)
