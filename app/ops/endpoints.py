"""Liveness and readiness probes."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.deps import RedisDep
from app.ops.service import readiness

router = APIRouter(tags=["ops"])


async def get_engine(request: Request) -> AsyncEngine:
    """The application's database engine (readiness connects outside any request session)."""
    engine: AsyncEngine = request.app.state.resources.engine
    return engine


EngineDep = Annotated[AsyncEngine, Depends(get_engine)]


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up. Touches nothing else."""
    return {"status": "ok"}


@router.get("/readyz", responses={503: {"description": "PostgreSQL down or schema behind"}})
async def readyz(engine: EngineDep, redis: RedisDep) -> JSONResponse:
    """PostgreSQL reachable and migrated to head (else 503); Redis reported (degraded)."""
    body, ready = await readiness(engine, redis)
    return JSONResponse(body, status_code=200 if ready else 503)
