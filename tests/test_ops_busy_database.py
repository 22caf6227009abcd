"""`/readyz` tells a busy PostgreSQL from one that is down: a pool whose every connection is
held, or statements waiting on a lock, keep the instance ready (PostgreSQL `busy`, status
`degraded`); only a database no new connection reaches is `down` (tests/test_ops.py)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import httpx
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from app.config import Settings
from app.core.database_urls import resolve_database_urls
from app.main import create_app

POOL = 3


@contextlib.asynccontextmanager
async def _serving(settings: Settings) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    app = create_app(settings.model_copy(update={"db_pool_size": POOL, "db_max_overflow": 0}))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            yield app, client


async def test_an_exhausted_pool_is_busy_and_ready(settings: Settings) -> None:
    async with _serving(settings) as (app, client), contextlib.AsyncExitStack() as held:
        engine = app.state.resources.engine
        connections: list[AsyncConnection] = []
        for _ in range(POOL):  # every pooled connection checked out, as by long requests
            connection = await held.enter_async_context(engine.connect())
            await connection.exec_driver_sql("SELECT 1")
            connections.append(connection)
        assert engine.pool.checkedout() == POOL

        response = await client.get("/readyz")

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "degraded"
    assert body["checks"]["postgres"]["status"] == "busy"
    # The fresh connection read the schema: it is known to be at head.
    assert body["checks"]["migrations"]["status"] == "ok"
    assert body["checks"]["embeddings"]["status"] == "ok"


async def test_statements_waiting_on_a_lock_are_busy_and_ready(settings: Settings) -> None:
    owner = create_async_engine(resolve_database_urls(settings).owner)
    try:
        async with _serving(settings) as (_app, client), owner.connect() as locker:
            await locker.exec_driver_sql("BEGIN")
            await locker.exec_driver_sql("LOCK TABLE alembic_version IN ACCESS EXCLUSIVE MODE")
            try:
                response = await asyncio.wait_for(client.get("/readyz"), timeout=20)
            finally:
                await locker.exec_driver_sql("ROLLBACK")
    finally:
        await owner.dispose()

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "degraded"
    assert body["checks"]["postgres"]["status"] == "busy"
    assert body["checks"]["migrations"]["status"] == "unknown"


async def test_a_database_no_connection_reaches_is_down_even_with_a_busy_pool(
    settings: Settings,
) -> None:
    async with _serving(settings) as (app, client), contextlib.AsyncExitStack() as held:
        engine = app.state.resources.engine
        for _ in range(POOL):
            connection = await held.enter_async_context(engine.connect())
            await connection.exec_driver_sql("SELECT 1")
        # The pool is exhausted and the database is gone: its URL now leads nowhere.
        real_url = engine.url
        engine.sync_engine.url = real_url.set(host="127.0.0.1", port=1, query={})
        try:
            response = await client.get("/readyz")
        finally:
            engine.sync_engine.url = real_url

    assert response.status_code == 503, response.text
    assert response.json()["checks"]["postgres"]["status"] == "down"
