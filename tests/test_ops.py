"""Liveness and readiness report the real state of PostgreSQL, the schema and Redis."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.core import migrate
from app.main import create_app
from tests.conftest import create_database, drop_database, make_settings
from tests.factories import login, make_tenant, make_user

DEAD_REDIS = "redis://127.0.0.1:1/0"  # nothing listens on port 1


async def _get(app: FastAPI, path: str) -> httpx.Response:
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return await client.get(path)


async def test_healthz(client: httpx.AsyncClient) -> None:
    response = await client.get("/healthz")
    assert response.json() == {"status": "ok"}


async def test_readyz_reports_every_dependency(client: httpx.AsyncClient) -> None:
    response = await client.get("/readyz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["checks"]["postgres"]["status"] == "ok"
    assert body["checks"]["migrations"]["current"] == migrate.head_revision()
    assert body["checks"]["redis"] == {
        "status": "ok",
        "mode": "server",
        "maxmemory_policy": "noeviction",
    }
    assert body["checks"]["embeddings"]["status"] == "ok"


async def test_vectors_of_another_model_are_unready(app: FastAPI) -> None:
    # As when the process started while PostgreSQL was down (it could not read the model on
    # record and kept the default), or `threadline reindex` switched models since.
    from app.embeddings.hashing import HashingEmbedder

    class Elsewhere(HashingEmbedder):
        name = "another-model"

    retriever = app.state.resources.retriever
    own = retriever.embedder
    retriever.embedder = Elsewhere(own.dimension)
    try:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            response = await client.get("/readyz")
    finally:
        retriever.embedder = own
    assert response.status_code == 503
    assert response.json()["checks"]["embeddings"] == {
        "status": "other_model",
        "stored": own.name,
        "process": "another-model",
    }


async def test_redis_down_is_degraded_not_unready(settings: Settings) -> None:
    response = await _get(
        create_app(settings.model_copy(update={"redis_url": DEAD_REDIS})), "/readyz"
    )
    assert response.status_code == 200
    assert response.json()["status"] == "degraded"
    assert response.json()["checks"]["redis"]["status"] == "down"


async def test_login_and_refresh_work_while_redis_is_down(app: FastAPI, db: AsyncSession) -> None:
    from app.core.redis import build_redis

    resources = app.state.resources
    live = resources.redis
    resources.redis = build_redis(resources.settings.model_copy(update={"redis_url": DEAD_REDIS}))
    try:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            session = await login(client, await make_user(db, await make_tenant(db)))
            refreshed = await client.post(
                "/auth/refresh", json={"refresh_token": session.refresh_token}
            )
        assert refreshed.status_code == 200
    finally:
        await resources.redis.close()
        resources.redis = live


async def test_postgres_down_is_unready(settings: Settings) -> None:
    unreachable = "postgresql://nobody@127.0.0.1:1/none"
    broken = settings.model_copy(
        update={"database_url": unreachable, "app_database_url": unreachable}
    )
    response = await _get(create_app(broken), "/readyz")
    assert response.status_code == 503
    assert response.json()["status"] == "unavailable"
    assert response.json()["checks"]["postgres"]["status"] == "down"


@pytest.fixture
async def database_one_revision_behind(
    pg_admin_url: URL, redis_url: str
) -> AsyncIterator[Settings]:
    name = f"threadline_behind_{uuid.uuid4().hex[:10]}"
    settings = make_settings(await create_database(pg_admin_url, name), redis_url)
    await migrate.upgrade(settings, migrate.asyncpg_owner_url(settings), "0005")
    yield settings
    await drop_database(pg_admin_url, name)


async def test_schema_behind_head_is_unready(database_one_revision_behind: Settings) -> None:
    response = await _get(create_app(database_one_revision_behind), "/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["migrations"] == {
        "status": "behind",
        "current": "0005",
        "head": migrate.head_revision(),
    }


async def test_docs_and_openapi_are_served(client: httpx.AsyncClient) -> None:
    schema = (await client.get("/openapi.json")).json()
    for path in (
        "/auth/token",
        "/auth/refresh",
        "/me",
        "/admin/users",
        "/admin/api-keys",
        "/sessions",
    ):
        assert path in schema["paths"], path
    assert (await client.get("/docs")).status_code == 200
