"""Readiness: whether PostgreSQL answers and is migrated to head, and whether Redis answers."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.migrate import current_revision, head_revision
from app.core.redis import RedisHandle

CHECK_TIMEOUT_SECONDS = 2.0


async def readiness(engine: AsyncEngine, redis: RedisHandle) -> tuple[dict[str, Any], bool]:
    """The report (`status`, `checks`) and whether the process is ready.

    Redis being down degrades the service (no cache, no resume) without stopping chat, so it
    makes the status `degraded` rather than failing readiness.
    """
    checks: dict[str, Any] = {}
    ready = True
    try:
        async with asyncio.timeout(CHECK_TIMEOUT_SECONDS):
            async with engine.connect() as connection:
                revision = await current_revision(connection)
        checks["postgres"] = {"status": "ok"}
        head = head_revision()
        at_head = revision == head
        checks["migrations"] = {
            "status": "ok" if at_head else "behind",
            "current": revision,
            "head": head,
        }
        ready = at_head
    except Exception as exc:  # any failure to reach PostgreSQL is "down"
        checks["postgres"] = {"status": "down", "error": type(exc).__name__}
        checks["migrations"] = {"status": "unknown"}
        ready = False

    redis_up = await redis.ping()
    checks["redis"] = {
        "status": "ok" if redis_up else "down",
        "mode": "in-process" if redis.in_process else "server",
    }
    status = "ok" if ready and redis_up else ("degraded" if ready else "unavailable")
    return {"status": status, "checks": checks}, ready
