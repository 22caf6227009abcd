"""PostgreSQL going away: an answer already generated is still stored complete, and requests
that need the database get 503 with Retry-After, not 500."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

from app.config import Settings
from app.core.db import scope_to_tenant
from app.main import create_app
from app.models import QueryHistory
from tests.chat_helpers import parse_sse, use_model
from tests.factories import login, make_session, make_tenant, make_user
from tests.fakes import ScriptedChatModel

pytestmark = pytest.mark.committed

ANSWER = " ".join(f"word{i}" for i in range(30))


@asynccontextmanager
async def _own_app(settings: Settings) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """The app with its own engine (connections named `threadline`, as in production)."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=60) as c:
            yield app, c


async def _terminate_app_backends(admin_url: URL, database: str) -> int:
    engine = create_async_engine(admin_url.set(database=database), isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as connection:
            result = await connection.exec_driver_sql(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND application_name = 'threadline'"
            )
            return int(result.scalar_one())
    finally:
        await engine.dispose()


async def test_an_answer_generated_while_the_apps_connections_were_terminated_is_stored_complete(
    settings: Settings, db: AsyncSession, pg_admin_url: URL
) -> None:
    tenant = await make_tenant(db)
    user = await make_user(db, tenant)
    chat = await make_session(db, user)
    database = make_url(settings.database_url or "").database or ""
    async with _own_app(settings) as (app, client):
        model = ScriptedChatModel(reply=lambda _: ANSWER, token_delay=0.05)
        use_model(app, model)
        who = await login(client, user)
        request = asyncio.create_task(
            client.post(
                "/chat/stream",
                json={"session_id": str(chat.id), "message": "What are the quarterly numbers?"},
                headers=who.headers,
            )
        )
        for _ in range(200):  # until the model is answering: the turn's reads are done
            if model.tokens_generated >= 3 or request.done():
                break
            await asyncio.sleep(0.02)
        assert model.tokens_generated >= 3
        # Every pooled connection of the app dies: the end-of-turn write meets dead ones.
        assert await _terminate_app_backends(pg_admin_url, database) >= 1
        response = await asyncio.wait_for(request, timeout=60)
    events, _ = parse_sse(response.text)
    assert events[-1].name == "done", events[-1]
    assert events[-1].data["status"] == "complete"
    await scope_to_tenant(db, tenant.id)
    stored = await db.scalar(
        select(QueryHistory).where(QueryHistory.id == uuid.UUID(events[-1].data["turn_id"]))
    )
    await db.commit()
    assert stored is not None
    assert (stored.status, stored.answer) == ("complete", ANSWER)


async def test_requests_get_503_with_retry_after_while_the_database_is_unreachable(
    settings: Settings,
) -> None:
    unreachable = "postgresql://nobody@127.0.0.1:1/none"
    broken = settings.model_copy(
        update={"database_url": unreachable, "app_database_url": unreachable}
    )
    async with _own_app(broken) as (_app, client):
        response = await client.post(
            "/auth/token", json={"email": "someone@example.com", "password": "a-password-1"}
        )
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"].isdigit()
    assert response.json()["error"]["code"] == "database_unavailable"
