"""Builds the application's resources at start-up and releases them at shutdown."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from app.config import Settings
from app.core.database_urls import resolve_database_urls
from app.core.db import create_engine, create_sessionmaker
from app.core.redis import build_redis
from app.core.resources import Resources

logger = logging.getLogger(__name__)


async def build_resources(settings: Settings) -> Resources:
    # Starting the embedded PostgreSQL blocks for about a second: keep it off the loop.
    urls = await asyncio.to_thread(resolve_database_urls, settings)
    engine = create_engine(
        urls.app, pool_size=settings.db_pool_size, max_overflow=settings.db_max_overflow
    )
    return Resources(
        settings=settings,
        urls=urls,
        engine=engine,
        sessionmaker=create_sessionmaker(engine),
        redis=build_redis(settings),
    )


async def release_resources(resources: Resources) -> None:
    await resources.redis.close()
    await resources.engine.dispose()


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    resources = await build_resources(settings)
    app.state.resources = resources
    logger.info(
        "threadline started",
        extra={
            "env": settings.env,
            "database": "embedded" if settings.embedded_database else "external",
            "redis": "in-process" if resources.redis.in_process else "server",
        },
    )
    try:
        yield
    finally:
        await release_resources(resources)
        if settings.embedded_database and getattr(app.state, "serving_process", False):
            from app.core.embedded import release_embedded_postgres

            await asyncio.to_thread(release_embedded_postgres)
        logger.info("threadline stopped")
