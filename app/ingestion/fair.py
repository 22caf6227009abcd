"""Round-robin between tenants for a few shared things (the ingestion worker processes).

A tenant that queued a hundred documents gets the next free worker no more often than a
tenant that queued one: waiters are kept per tenant, and a freed item goes to the next
tenant in turn, not to the oldest waiter (issue 33: one tenant's uploads delayed
another's document past 900 s).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class FairQueue(Generic[T]):
    """Hands out `items` one per caller; callers waiting are served tenant by tenant in
    turn, in arrival order within a tenant."""

    def __init__(self, items: list[T]) -> None:
        self._free = list(items)
        self._waiting: dict[Hashable, deque[asyncio.Future[T]]] = {}
        """Insertion order is the turn: a tenant served goes to the back."""

    async def acquire(self, turn: Hashable) -> T:
        """An item, once it is this caller's turn; give it back with `release`."""
        if self._free and not self._waiting:
            return self._free.pop()
        waiter: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(turn, deque()).append(waiter)
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release(waiter.result())  # handed an item as it was cancelled
            else:
                queue = self._waiting.get(turn)
                if queue is not None and waiter in queue:
                    queue.remove(waiter)
                    if not queue:
                        del self._waiting[turn]
            raise

    def release(self, item: T) -> None:
        """Give `item` back: to the first waiter of the next tenant in turn, if any."""
        while self._waiting:
            turn = next(iter(self._waiting))
            queue = self._waiting.pop(turn)
            waiter = queue.popleft()
            if queue:
                self._waiting[turn] = queue  # to the back of the turn
            if not waiter.done():
                waiter.set_result(item)
                return
        self._free.append(item)
