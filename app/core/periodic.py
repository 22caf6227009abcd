"""A job run on a timer inside the process (lease renewal, orphan and ingestion recovery
sweeps, the retention sweep): a failed run is logged and tried again at the next tick."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

logger = logging.getLogger(__name__)


class Periodic:
    """Runs a job at a fixed interval on the event loop until stopped."""

    def __init__(
        self, name: str, seconds: float, job: Callable[[], Awaitable[object]], *, at_start: bool
    ) -> None:
        """`at_start`: run once at once (a recovery scan), else first after one interval."""
        self.name = name
        self.seconds = seconds
        self.job = job
        self.at_start = at_start
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    def start(self) -> None:
        """Start the timer on the running event loop."""
        self._stopping = False
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def _loop(self) -> None:
        if not self.at_start:
            await asyncio.sleep(self.seconds)
        # The flag, not only the cancellation, ends the loop: a job may absorb a cancellation
        # (a library cleaning up a connection as it lands) and return normally, and the loop
        # would then run on while `stop` waits for it, forever.
        while not self._stopping:
            try:
                await self.job()
            except Exception:  # PostgreSQL or Redis away: the next tick tries again
                logger.warning("%s failed; retried at the next interval", self.name, exc_info=True)
            if self._stopping:
                break
            await asyncio.sleep(self.seconds)

    async def stop(self) -> None:
        """Cancel the timer and wait until it has ended."""
        if self._task is not None:
            self._stopping = True
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
