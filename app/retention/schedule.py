"""Runs the retention sweep on a timer inside the API process (the embedded default).

With a Celery broker configured, Celery beat schedules the same sweep instead
(`app.retention.tasks`), so exactly one place runs it. The first sweep waits one interval:
starting a process never deletes anything by surprise.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import UTC, datetime

from app.core.resources import Resources
from app.retention.purge import sweep

logger = logging.getLogger(__name__)


class RetentionScheduler:
    def __init__(self, resources: Resources, interval_seconds: float) -> None:
        self.resources = resources
        self.interval = interval_seconds
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                # Read at each run: tests route the app through another sessionmaker.
                await sweep(self.resources.sessionmaker, self.resources.history, datetime.now(UTC))
            except Exception:
                logger.exception("retention sweep failed; retried at the next interval")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
