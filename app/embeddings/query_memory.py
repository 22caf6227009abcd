"""Query vectors remembered, and shared while they are being computed.

A turn asks for its question's vector several times (the injection check embeds it folded,
the FAQ fast path and retrieval embed it as typed) and for its history query's once; the
local model costs several milliseconds a run, on the path to the first token. `QueryMemory`
keys a vector by what the model reads (the caller's key: word pieces for a local model, so
texts that differ only where the tokenizer does not look share one run), keeps the recent
ones, and lets a caller start a run early (`start`) that a later `get` for the same key
waits for instead of repeating it.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Sequence

Vector = list[float]


class QueryMemory:
    """The last `size` query vectors by key, and the runs in flight on each event loop."""

    def __init__(
        self,
        compute: Callable[[list[str]], Awaitable[list[Vector]]],
        key: Callable[[str], Hashable],
        size: int,
    ) -> None:
        self._compute = compute
        self._key = key
        self._size = size
        self._vectors: OrderedDict[Hashable, Vector] = OrderedDict()
        self._running: dict[Hashable, asyncio.Future[Vector]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, texts: Sequence[str]) -> None:
        """Begin computing the vectors of texts not remembered or in flight; returns at once."""
        self._pending([self._key(text) for text in texts], texts)

    async def get(self, texts: Sequence[str]) -> list[Vector]:
        """One vector per text (a copy: callers may keep or change it)."""
        keys = [self._key(text) for text in texts]
        waiting = self._pending(keys, texts)
        # Taken before any wait: a long wait may see these fall out of the memory.
        ready = {key: self._vectors[key] for key in keys if key not in waiting}
        for key in ready:
            self._vectors.move_to_end(key)
        vectors = []
        for key in keys:
            if key in ready:
                vectors.append(list(ready[key]))
            else:
                # Shielded: a cancelled turn must not cancel the run another turn awaits.
                vectors.append(list(await asyncio.shield(waiting[key])))
        return vectors

    def _pending(
        self, keys: Sequence[Hashable], texts: Sequence[str]
    ) -> dict[Hashable, asyncio.Future[Vector]]:
        """The runs each key not remembered waits for, starting those not in flight here."""
        loop = asyncio.get_running_loop()
        waiting: dict[Hashable, asyncio.Future[Vector]] = {}
        missing: dict[Hashable, str] = {}
        for key, text in zip(keys, texts, strict=True):
            if key in self._vectors or key in waiting:
                continue
            running = self._running.get(key)
            if running is not None and running.get_loop() is loop:
                waiting[key] = running
            else:  # not started, or started by another event loop (a CLI run, a test)
                missing[key] = text
                waiting[key] = self._running[key] = loop.create_future()
        if missing:
            futures = {key: waiting[key] for key in missing}
            task = loop.create_task(self._run(list(missing.values()), futures))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return waiting

    async def _run(self, texts: list[str], futures: dict[Hashable, asyncio.Future[Vector]]) -> None:
        try:
            vectors = await self._compute(texts)
        except Exception as exc:
            for key, future in futures.items():
                self._forget_run(key, future)
                if not future.done():
                    future.set_exception(exc)
                    # Retrieved here: a run only started (`start`) and never awaited must not
                    # log "exception never retrieved"; a caller that awaits still gets it.
                    future.exception()
            return
        for (key, future), vector in zip(futures.items(), vectors, strict=True):
            self._vectors[key] = vector
            self._vectors.move_to_end(key)
            self._forget_run(key, future)
            if not future.done():
                future.set_result(vector)
        while len(self._vectors) > self._size:
            self._vectors.popitem(last=False)

    def _forget_run(self, key: Hashable, future: asyncio.Future[Vector]) -> None:
        if self._running.get(key) is future:
            del self._running[key]
