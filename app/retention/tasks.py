"""The retention sweep as a job of a Celery worker: beat schedules it by name (`SWEEP`,
`app.bootstrap.create_celery`), a worker process runs it on its one event loop and engine
(`app.worker.tasks`). Without a broker, `app.retention.schedule` runs the same sweep."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.conversation.history import HistoryStore
from app.retention.purge import sweep

SWEEP = "threadline.retention.sweep"


async def sweep_job(
    sessionmaker: async_sessionmaker[AsyncSession], history: HistoryStore | None
) -> dict[str, int]:
    """Run the sweep now; what it purged, by kind (the task's result)."""
    purged = await sweep(sessionmaker, history, datetime.now(UTC))
    return {
        "turns": purged.turns,
        "checkpoints": purged.checkpoints,
        "orphan_checkpoints": purged.orphan_checkpoints,
        "refresh_tokens": purged.refresh_tokens,
    }
