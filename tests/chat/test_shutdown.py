"""The application's shutdown (lifespan exit) ends live streams as a stop would: `done`,
status incomplete, partial answer kept, in the client's stream and in the Redis buffer."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.core.db import scope_to_tenant
from app.main import create_app
from app.models import QueryHistory
from tests.chat_helpers import parse_sse, use_model
from tests.factories import login, make_session, make_tenant, make_user
from tests.fakes import ScriptedChatModel

pytestmark = pytest.mark.committed

ANSWER = " ".join(f"word{i}" for i in range(200))


async def test_lifespan_exit_ends_a_live_stream_with_done_and_buffers_it(
    settings: Settings, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    user = await make_user(db, tenant)
    chat = await make_session(db, user)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        model = ScriptedChatModel(reply=lambda _: ANSWER, token_delay=0.05)
        use_model(app, model)
        transport = httpx.ASGITransport(app=app)
        client = httpx.AsyncClient(transport=transport, base_url="http://t", timeout=30)
        who = await login(client, user)
        body = {"session_id": str(chat.id), "message": "What are the quarterly numbers?"}
        request = asyncio.create_task(client.post("/chat/stream", json=body, headers=who.headers))
        for _ in range(300):
            if model.tokens_generated >= 3:
                break
            await asyncio.sleep(0.02)
        assert model.tokens_generated >= 3
        turn_id = next(iter(app.state.resources.guards.streams.runs))
        buffer_key = app.state.resources.guards.streams.buffer.events_key(turn_id)

    response = await asyncio.wait_for(request, timeout=5)
    await client.aclose()
    events, _ = parse_sse(response.text)
    done = events[-1]
    assert done.name == "done", done
    assert (done.data["status"], done.data["reason"]) == ("incomplete", "shutdown")
    streamed = "".join(e.data["text"] for e in events if e.name == "token")
    assert streamed and done.data["answer"] == streamed
    await scope_to_tenant(db, tenant.id)
    stored = await db.scalar(select(QueryHistory).where(QueryHistory.id == uuid.UUID(str(turn_id))))
    await db.commit()
    assert stored is not None and (stored.status, stored.answer) == ("incomplete", streamed)
    # The buffer's last event is that `done` (read with a fresh client: the app's is closed).
    fresh = Redis.from_url(settings.redis_url or "", decode_responses=True)
    try:
        entries: Any = await fresh.xrevrange(buffer_key, count=1)
    finally:
        await fresh.aclose()
    assert entries and entries[0][1]["n"] == "done"
    assert json.loads(entries[0][1]["d"])["answer"] == streamed
