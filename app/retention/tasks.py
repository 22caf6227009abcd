"""The retention sweep as a Celery task, scheduled by beat (`celery_app.beat_schedule`)."""

from __future__ import annotations

import asyncio

from app.worker.celery_app import celery_app

SWEEP = "threadline.retention.sweep"


@celery_app.task(name=SWEEP)
def retention_sweep() -> dict[str, int]:
    return asyncio.run(_sweep())


async def _sweep() -> dict[str, int]:
    from datetime import UTC, datetime

    from app.config import get_settings
    from app.core.database_urls import resolve_database_urls
    from app.core.db import create_engine, create_sessionmaker
    from app.core.redis import build_redis
    from app.retention.purge import sweep
    from app.turns.history import HistoryStore

    settings = get_settings()
    engine = create_engine(resolve_database_urls(settings).app, pool_size=2, max_overflow=0)
    redis = build_redis(settings)
    try:
        history = HistoryStore(
            redis, limit=settings.history_turns, ttl_seconds=settings.history_cache_ttl_seconds
        )
        purged = await sweep(create_sessionmaker(engine), history, datetime.now(UTC))
        return {
            "turns": purged.turns,
            "checkpoints": purged.checkpoints,
            "orphan_checkpoints": purged.orphan_checkpoints,
            "refresh_tokens": purged.refresh_tokens,
        }
    finally:
        await redis.close()
        await engine.dispose()
