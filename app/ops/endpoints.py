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


async def get_embedder_name(request: Request) -> str:
    """The model this process embeds with (the retriever's embedder)."""
    name: str = request.app.state.resources.retriever.embedder.name
    return name


EngineDep = Annotated[AsyncEngine, Depends(get_engine)]
EmbedderNameDep = Annotated[str, Depends(get_embedder_name)]


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up. Touches nothing else."""
    return {"status": "ok"}


@router.get(
    "/readyz",
    responses={503: {"description": "PostgreSQL down, schema behind, or vectors of another model"}},
)
async def readyz(engine: EngineDep, redis: RedisDep, embedder: EmbedderNameDep) -> JSONResponse:
    """PostgreSQL reachable, migrated to head and holding this process's embedding model's
    vectors (else 503); Redis reported (degraded)."""
    body, ready = await readiness(engine, redis, embedder)
    return JSONResponse(body, status_code=200 if ready else 503)
