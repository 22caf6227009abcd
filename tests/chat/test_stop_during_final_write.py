"""A stop that lands while persist's write is committing: the client, and a retry with the
same Idempotency-Key, are told what the row says (issue 31, item 3; ADR 0068)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.conversation.pipeline import runner as runner_module
from app.conversation.repository import TurnRepository
from app.core.db import scope_to_tenant
from app.models import QueryHistory
from tests.chat.stream_driver import stream_until
from tests.chat_helpers import parse_sse, use_model
from tests.factories import make_chatter
from tests.fakes import ScriptedChatModel

pytestmark = pytest.mark.committed

ANSWER = "Refunds are accepted within thirty days of purchase."


def _hold_persist_after_its_commit(
    app: FastAPI, monkeypatch: pytest.MonkeyPatch
) -> tuple[asyncio.Event, asyncio.Event]:
    """persist's transaction commits, then waits on `gate` before persist may return: the
    row is stored while the runner has not heard back (a commit in flight, as its client
    sees it). Returns (committed, gate)."""
    committed, gate = asyncio.Event(), asyncio.Event()
    context = app.state.resources.turn_context
    original_transaction = context.transaction
    original_complete = TurnRepository.complete

    async def complete(self: TurnRepository, *args: Any, **kwargs: Any) -> Any:
        self.db.info["completing"] = True
        return await original_complete(self, *args, **kwargs)

    @asynccontextmanager
    async def transaction(tenant_id: Any, narrowed_to: Any = None) -> AsyncIterator[AsyncSession]:
        async with original_transaction(tenant_id, narrowed_to) as db:
            yield db
        if db.info.get("completing"):
            committed.set()
            await gate.wait()

    monkeypatch.setattr(TurnRepository, "complete", complete)
    monkeypatch.setattr(context, "transaction", transaction)
    return committed, gate


async def _row(db: AsyncSession, tenant_id: uuid.UUID, turn_id: str) -> QueryHistory:
    await scope_to_tenant(db, tenant_id)
    row = await db.scalar(select(QueryHistory).where(QueryHistory.id == uuid.UUID(turn_id)))
    assert row is not None
    await db.refresh(row)
    await db.commit()
    return row


async def test_a_stop_during_the_final_write_reports_what_the_row_says(
    app: FastAPI,
    client: httpx.AsyncClient,
    db: AsyncSession,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tenant, _user, chat, owner = await make_chatter(client, db)
    use_model(app, ScriptedChatModel(reply=lambda _: ANSWER))
    committed, gate = _hold_persist_after_its_commit(app, monkeypatch)
    headers = {**owner.headers, "Idempotency-Key": "stop-at-the-final-write"}
    body = {"session_id": str(chat.id), "message": "what is the refund policy?"}

    streaming = asyncio.create_task(stream_until(app, headers, body, lambda _: False))
    await asyncio.wait_for(committed.wait(), 20)
    runs = app.state.resources.guards.streams.runs
    turn_id = str(next(iter(runs)))
    # What a stop request (or SIGTERM's shutdown) does when it reaches the run's process; the
    # endpoint's own check, which reads the row as pending, ran before the commit.
    assert runs[uuid.UUID(turn_id)].stop()
    raw, _ = await asyncio.wait_for(streaming, 20)
    gate.set()

    row = await _row(db, tenant.id, turn_id)
    assert row.status == "complete"  # the commit landed before the stop
    events, _ = parse_sse(raw.decode())
    done = events[-1]
    assert done.name == "done"
    assert (done.data["status"], done.data["answer"]) == (row.status, row.answer)

    # A retry with the same key repeats what is stored, not the stop's guess.
    replayed = await client.post("/chat/stream", json=body, headers=headers)
    assert replayed.status_code == 200, replayed.text
    again = parse_sse(replayed.text)[0][-1]
    assert again.name == "done"
    assert (again.data["status"], again.data["answer"]) == (row.status, row.answer)


async def test_a_stop_right_after_persist_returned_reports_what_the_row_says(
    app: FastAPI,
    client: httpx.AsyncClient,
    db: AsyncSession,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The stop lands after persist returned (its commit done, its timing recorded) and
    before its update reached the runner: bench.chaos's stop phase told 5 of 40 such turns
    `incomplete` while their rows said `complete`, and their retries repeated it."""
    tenant, _user, chat, owner = await make_chatter(client, db)
    use_model(app, ScriptedChatModel(reply=lambda _: ANSWER))
    runs = app.state.resources.guards.streams.runs

    class StopsWhenPersistReturns(dict[str, float]):
        """The run's node timings: persist's is written as persist returns; the run is
        stopped right then, as a Stop arriving at that moment would."""

        def __setitem__(self, node: str, ms: float) -> None:
            super().__setitem__(node, ms)
            if node == "persist":
                for run in list(runs.values()):
                    run.stop()

    @dataclass
    class Progress(runner_module._Progress):
        node_ms: dict[str, float] = field(default_factory=StopsWhenPersistReturns)

    monkeypatch.setattr(runner_module, "_Progress", Progress)
    headers = {**owner.headers, "Idempotency-Key": "stop-after-persist-returned"}
    body = {"session_id": str(chat.id), "message": "what is the refund policy?"}

    raw, _ = await asyncio.wait_for(stream_until(app, headers, body, lambda _: False), 20)
    events, _ = parse_sse(raw.decode())
    done = events[-1]
    assert done.name == "done"
    row = await _row(db, tenant.id, str(done.data["turn_id"]))
    assert row.status == "complete"
    assert (done.data["status"], done.data["answer"]) == (row.status, row.answer)
    replayed = await client.post("/chat/stream", json=body, headers=headers)
    assert replayed.status_code == 200, replayed.text
    again = parse_sse(replayed.text)[0][-1]
    assert (again.data["status"], again.data["answer"]) == (row.status, row.answer)
