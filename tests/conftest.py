"""Test harness: real PostgreSQL (+pgvector) and real Redis, one migrated database per run.

Each test runs inside a transaction of the application role that is rolled back at the end;
the code under test commits to savepoints inside it (`join_transaction_mode`), so its own
commits and rollbacks behave as in production and nothing leaks between tests.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from _pytest.nodeid import NodeId  # pytest 9's node ids; see the last hook
from fastapi import FastAPI
from redis.asyncio import Redis
from sqlalchemy import text
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import (
    AsyncConnection,
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from app.config import Settings
from app.core import migrate
from app.core.database_urls import asyncpg_url, resolve_database_urls
from app.core.db import create_sessionmaker
from app.main import create_app
from tests.services import ServiceMissing, postgres_server, redis_server, require_service

TEST_JWT_SECRET = "test-secret-0123456789abcdef0123456789abcdef"
TEST_APP_PASSWORD = "threadline-test-app:$pw$'quoted'"  # exercises the migration's quoting
# Roles are cluster-wide: tests use their own, so a run against a shared server never touches
# the password of a live deployment's `threadline_app`.
TEST_APP_ROLE = "threadline_test_app"


def _require(exc: ServiceMissing) -> None:
    """A missing service fails the run in CI and skips locally."""
    require_service(str(exc))


@pytest.fixture(scope="session")
def pg_admin_url() -> Iterator[URL]:
    try:
        with postgres_server() as server:
            yield asyncpg_url(server.admin_url)
    except ServiceMissing as exc:
        _require(exc)


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    try:
        with redis_server() as url:
            yield url
    except ServiceMissing as exc:
        _require(exc)


async def create_database(admin_url: URL, name: str) -> URL:
    engine = create_async_engine(admin_url, isolation_level="AUTOCOMMIT")
    async with engine.connect() as connection:
        await connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
    await engine.dispose()
    return admin_url.set(database=name)


async def drop_database(admin_url: URL, name: str) -> None:
    engine = create_async_engine(admin_url, isolation_level="AUTOCOMMIT")
    async with engine.connect() as connection:
        await connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await engine.dispose()


@pytest.fixture
async def empty_database(pg_admin_url: URL, redis_url: str) -> AsyncIterator[Settings]:
    """The settings of a new database of its own, nothing migrated: for the tests that step
    through the revisions."""
    name = f"threadline_mig_{uuid.uuid4().hex[:10]}"
    url = await create_database(pg_admin_url, name)
    yield make_settings(url, redis_url)
    await drop_database(pg_admin_url, name)


async def run_sql(url: URL, sql: str, **params: object) -> list[tuple[object, ...]]:
    """One statement in a transaction and a connection of its own; its rows, if any."""
    engine = create_async_engine(url)
    try:
        async with engine.begin() as connection:
            result = await connection.execute(text(sql), params)
            return [tuple(row) for row in result] if result.returns_rows else []
    finally:
        await engine.dispose()


def make_settings(owner_url: URL, redis_url: str, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "env": "test",
        "database_url": owner_url.render_as_string(hide_password=False),
        "redis_url": redis_url,
        "redis_prefix": f"tl-test-{uuid.uuid4().hex[:8]}:",
        "jwt_secret": TEST_JWT_SECRET,
        "app_db_password": TEST_APP_PASSWORD,
        "app_db_role": TEST_APP_ROLE,
        "log_json": False,
        # Deterministic and instant; the tests of the default (onnx) embedder ask for it.
        "embedder": "hashing",
        # The names the tests' clients use (`http://t`, `http://threadline.test`, ...), and
        # Starlette's TestClient's (schemathesis).
        "allowed_hosts": ["localhost", "127.0.0.1", "::1", "t", "owner", "*.test", "testserver"],
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
async def test_database(pg_admin_url: URL, redis_url: str) -> AsyncIterator[Settings]:
    """A fresh database, migrated once for the whole run; its settings."""
    name = f"threadline_test_{uuid.uuid4().hex[:10]}"
    owner_url = await create_database(pg_admin_url, name)
    settings = make_settings(owner_url, redis_url)
    await migrate.upgrade(settings, resolve_database_urls(settings).owner)
    yield settings
    await drop_database(pg_admin_url, name)


@pytest.fixture(scope="session")
async def app_engine(test_database: Settings) -> AsyncIterator[AsyncEngine]:
    """Connections as the application role: RLS applies to everything the tests do."""
    engine = create_async_engine(resolve_database_urls(test_database).app)
    yield engine
    await engine.dispose()


@pytest.fixture
async def settings(test_database: Settings) -> Settings:
    # A fresh Redis prefix per test keeps tests apart without flushing a shared Redis.
    return test_database.model_copy(update={"redis_prefix": f"tl-test-{uuid.uuid4().hex[:8]}:"})


@pytest.fixture
async def connection(app_engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    async with app_engine.connect() as conn:
        outer = await conn.begin()
        yield conn
        if outer.is_active:
            await outer.rollback()


@pytest.fixture
async def sessionmaker(
    request: pytest.FixtureRequest,
    app_engine: AsyncEngine,
    test_database: Settings,
    connection: AsyncConnection,
) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    """Sessions inside the test's rolled-back transaction; or, for tests marked `committed`
    (several connections: the checkpointer's pool, concurrent requests), real commits that are
    truncated away afterwards."""
    if request.node.get_closest_marker("committed"):
        yield create_sessionmaker(app_engine)
        await truncate_everything(test_database)
        return
    yield async_sessionmaker(
        bind=connection,
        expire_on_commit=False,
        autoflush=False,
        join_transaction_mode="create_savepoint",
    )


async def truncate_everything(settings: Settings) -> None:
    engine = create_async_engine(resolve_database_urls(settings).owner)
    try:
        # The apps' background loops (ingestion recovery, the orphaned-turn sweep, lease
        # renewal) may hold row locks on these tables: TRUNCATE can deadlock with them, and
        # PostgreSQL then aborts one side. When it picks the TRUNCATE, take it again.
        for attempt in range(5):
            try:
                await _truncate(engine)
                return
            except DBAPIError as exc:
                if "deadlock detected" not in str(exc) or attempt == 4:
                    raise
    finally:
        await engine.dispose()


async def _truncate(engine: AsyncEngine) -> None:
    async with engine.begin() as connection:
        tables = (
            await connection.exec_driver_sql(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                "AND tablename NOT IN ('alembic_version', 'checkpoint_migrations')"
            )
        ).scalars()
        await connection.exec_driver_sql(
            "TRUNCATE " + ", ".join(f'"{t}"' for t in tables) + " CASCADE"
        )


@pytest.fixture
async def db(sessionmaker: async_sessionmaker[AsyncSession]) -> AsyncIterator[AsyncSession]:
    """A session for factories and assertions, inside the test's transaction."""
    async with sessionmaker() as db:
        yield db


@pytest.fixture
async def app(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession]
) -> AsyncIterator[FastAPI]:
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        application.state.resources.use_sessionmaker(sessionmaker)
        yield application
        await _delete_keys(application.state.resources.redis.client, settings.redis_prefix)


async def _delete_keys(client: Redis, prefix: str) -> None:
    keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=500)]
    if keys:
        await client.delete(*keys)


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://threadline.test") as c:
        yield c


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """schemathesis names one item per operation (`test[GET /healthz]`), but on pytest 9 all
    of them carry the function's node id; pytest-xdist tells items apart by node id, so it
    would run one operation of 82. Each gets the node id its name implies."""
    for item in items:
        if type(item).__name__ == "SchemathesisFunction" and item.parent is not None:
            item._id = NodeId.parse(f"{item.parent.nodeid}::{item.name}")
