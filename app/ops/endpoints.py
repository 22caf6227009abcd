from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from app.core.deps import ResourcesDep
from app.core.migrate import current_revision, head_revision

router = APIRouter(tags=["ops"])

CHECK_TIMEOUT_SECONDS = 2.0


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up. Touches nothing else."""
    return {"status": "ok"}


@router.get("/readyz", responses={503: {"description": "PostgreSQL down or schema behind"}})
async def readyz(resources: ResourcesDep) -> JSONResponse:
    """PostgreSQL reachable and migrated to head (else 503); Redis reported.

    Redis being down degrades the service (no cache, no resume) without stopping chat, so it
    makes the status `degraded` rather than failing readiness.
    """
    checks: dict[str, Any] = {}
    ready = True
    try:
        async with asyncio.timeout(CHECK_TIMEOUT_SECONDS):
            async with resources.engine.connect() as connection:
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

    redis_up = await resources.redis.ping()
    checks["redis"] = {
        "status": "ok" if redis_up else "down",
        "mode": "in-process" if resources.redis.in_process else "server",
    }
    status = "ok" if ready and redis_up else ("degraded" if ready else "unavailable")
    return JSONResponse({"status": status, "checks": checks}, status_code=200 if ready else 503)
