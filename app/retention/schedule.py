"""Runs the retention sweep on a timer inside the API process (the embedded default).

With a Celery broker configured, Celery beat schedules the same sweep instead
(`app.retention.tasks`), so exactly one place runs it. The first sweep waits one interval:
starting a process never deletes anything by surprise.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from app.core.periodic import Periodic
from app.resources import Resources
from app.retention.purge import sweep

logger = logging.getLogger(__name__)


class RetentionScheduler:
    def __init__(self, resources: Resources, interval_seconds: float) -> None:
        self.resources = resources
        self.interval = interval_seconds
        self._timer = Periodic("retention sweep", interval_seconds, self._sweep, at_start=False)

    def start(self) -> None:
        self._timer.start()

    async def _sweep(self) -> None:
        # Read at each run: tests route the app through another sessionmaker.
        await sweep(self.resources.sessionmaker, self.resources.history, datetime.now(UTC))

    async def stop(self) -> None:
        await self._timer.stop()
