"""A turn whose lease expires while its process is still alive (paused, starved): another
process finishes it as an orphan; when the first one comes back, its final write must not
overwrite that outcome, and its client is told what is stored (issue 31, item 4; ADR 0068)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from langchain_core.messages import BaseMessage
from pydantic import Field
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.core.db import scope_to_tenant
from app.models import QueryHistory
from tests.chat.stream_driver import other_process
from tests.chat_helpers import use_model
from tests.factories import make_chatter
from tests.fakes import ScriptedChatModel

pytestmark = pytest.mark.committed

ANSWER = "the first process's own answer, generated after its lease was gone"


class HeldModel(ScriptedChatModel):
    """Answers only once `gate` is set: the run is held (as by SIGSTOP) meanwhile."""

    gate: Any = Field(default_factory=asyncio.Event)
    entered: Any = Field(default_factory=asyncio.Event)

    async def _pieces(self, messages: list[BaseMessage]) -> AsyncIterator[str]:
        self.entered.set()
        await self.gate.wait()
        async for piece in super()._pieces(messages):
            yield piece


@pytest.fixture
async def settings(test_database: Settings) -> Settings:
    """Renewal and sweep only when the test says: it expires the lease by hand, as a pause
    longer than the lease would, and nothing may renew it behind its back."""
    return test_database.model_copy(
        update={
            "redis_prefix": f"tl-test-{uuid.uuid4().hex[:8]}:",
            "turn_lease_renew_seconds": 3600.0,
            "turn_sweep_seconds": 3600.0,
        }
    )


async def _expire_lease(db: AsyncSession, tenant_id: uuid.UUID) -> uuid.UUID:
    await scope_to_tenant(db, tenant_id)
    turn_id = await db.scalar(select(QueryHistory.id).where(QueryHistory.status == "pending"))
    assert turn_id is not None
    await db.execute(
        update(QueryHistory)
        .where(QueryHistory.id == turn_id)
        .values(lease_expires_at=func.clock_timestamp() - func.make_interval(0, 0, 0, 0, 0, 0, 1))
    )
    await db.commit()
    return turn_id


async def _rows(db: AsyncSession, tenant_id: uuid.UUID) -> list[QueryHistory]:
    await scope_to_tenant(db, tenant_id)
    rows = list((await db.scalars(select(QueryHistory))).all())
    await db.commit()
    for row in rows:
        await db.refresh(row)
    return rows


async def test_a_turn_finished_as_an_orphan_is_not_overwritten_by_its_paused_owner(
    app: FastAPI,
    client: httpx.AsyncClient,
    db: AsyncSession,
    settings: Settings,
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    tenant, _user, chat, owner = await make_chatter(client, db)
    held = HeldModel(reply=lambda _: ANSWER)
    use_model(app, held)
    headers = {**owner.headers, "Idempotency-Key": "paused-owner-1"}
    body = {"session_id": str(chat.id), "message": "what is the refund policy?"}
    async with other_process(settings, sessionmaker) as (second_app, second):
        use_model(second_app, ScriptedChatModel(reply=lambda _: "never asked"))
        first = asyncio.create_task(client.post("/chat", json=body, headers=headers))
        await asyncio.wait_for(held.entered.wait(), 20)
        turn_id = await _expire_lease(db, tenant.id)

        # The second process takes the turn over as an orphan (its sweep), and a retry there
        # gets that outcome.
        assert await second_app.state.resources.guards.leases.sweep() == 1
        retried = await second.post("/chat", json=body, headers=headers)
        assert retried.status_code == 200, retried.text
        stored_answer = retried.json()
        assert stored_answer["turn_id"] == str(turn_id)
        assert stored_answer["status"] == "incomplete"

        held.gate.set()  # the paused process comes back and finishes its run
        told = await asyncio.wait_for(first, 30)
        assert told.status_code == 200, told.text

        rows = await _rows(db, tenant.id)
        assert len(rows) == 1
        row = rows[0]
        assert row.status == "incomplete"  # the orphan's outcome stands
        assert row.answer != ANSWER
        # The first client is told what is stored, not its own answer.
        assert told.json()["turn_id"] == str(turn_id)
        assert told.json()["status"] == row.status
        assert told.json()["answer"] == row.answer
        # One answer per key, on both processes.
        again_first = await client.post("/chat", json=body, headers=headers)
        again_second = await second.post("/chat", json=body, headers=headers)
        for again in (again_first, again_second):
            assert again.status_code == 200, again.text
            assert again.json()["answer"] == row.answer
            assert again.json()["status"] == row.status
