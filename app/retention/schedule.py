"""Runs the retention sweep on a timer inside the API process (the embedded default).

With a Celery broker configured, Celery beat schedules the same sweep instead
(`app.retention.tasks`), so exactly one place runs it. The first sweep waits one interval:
starting a process never deletes anything by surprise.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.conversation.history import HistoryStore
from app.core.periodic import Periodic
from app.retention.purge import sweep

logger = logging.getLogger(__name__)


class RetentionScheduler:
    """Runs the retention sweep every `interval_seconds` in this process until stopped."""

    def __init__(
        self,
        sessionmaker: Callable[[], async_sessionmaker[AsyncSession]],
        history: HistoryStore,
        interval_seconds: float,
    ) -> None:
        self.sessionmaker = sessionmaker
        self.history = history
        self.interval = interval_seconds
        self._timer = Periodic("retention sweep", interval_seconds, self._sweep, at_start=False)

    def start(self) -> None:
        """Start the timer (the first sweep comes one interval later)."""
        self._timer.start()

    async def _sweep(self) -> None:
        # Asked at each run: tests route the app through another sessionmaker.
        await sweep(self.sessionmaker(), self.history, datetime.now(UTC))

    async def stop(self) -> None:
        """Stop the timer, waiting for a sweep under way."""
        await self._timer.stop()
