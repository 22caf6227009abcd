"""Readiness: whether PostgreSQL answers and is migrated to head, whether its vectors are the
model this process embeds with, and whether Redis answers."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from app.core.migrate import current_revision, head_revision
from app.core.redis import RedisHandle
from app.embeddings.repository import recorded_model

CHECK_TIMEOUT_SECONDS = 2.0


async def readiness(
    engine: AsyncEngine, redis: RedisHandle, embedder: str | None = None
) -> tuple[dict[str, Any], bool]:
    """The report (`status`, `checks`) and whether the process is ready.

    Redis being down degrades the service (no cache, no resume) without stopping chat, so it
    makes the status `degraded` rather than failing readiness. Stored vectors of another
    model than `embedder` (the process started while PostgreSQL was down and could not read
    the model on record, or `threadline reindex` switched models since) fail readiness: the
    process must restart to search and ingest in the database's space.
    """
    checks: dict[str, Any] = {}
    ready = True
    try:
        async with asyncio.timeout(CHECK_TIMEOUT_SECONDS):
            async with engine.connect() as connection:
                revision = await current_revision(connection)
                head = head_revision()
                at_head = revision == head
                # Behind head the table may not be there yet: the schema check says enough.
                stored = await recorded_model(AsyncSession(bind=connection)) if at_head else None
        checks["postgres"] = {"status": "ok"}
        checks["migrations"] = {
            "status": "ok" if at_head else "behind",
            "current": revision,
            "head": head,
        }
        same_space = embedder is None or stored in (None, embedder)
        checks["embeddings"] = {
            "status": "ok" if same_space else "other_model",
            "stored": stored,
            "process": embedder,
        }
        ready = at_head and same_space
    except Exception as exc:  # any failure to reach PostgreSQL is "down"
        checks["postgres"] = {"status": "down", "error": type(exc).__name__}
        checks["migrations"] = {"status": "unknown"}
        checks["embeddings"] = {"status": "unknown"}
        ready = False

    redis_up = await redis.ping()
    checks["redis"] = {
        "status": "ok" if redis_up else "down",
        "mode": "in-process" if redis.in_process else "server",
    }
    status = "ok" if ready and redis_up else ("degraded" if ready else "unavailable")
    return {"status": status, "checks": checks}, ready
