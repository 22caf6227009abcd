"""Checkpoint storage grows at most linearly with a session's turns, and is pruned to the
newest `THREADLINE_CHECKPOINTS_PER_THREAD` checkpoints."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.conversation.checkpoints.checkpointer import CURRENT_TENANT
from app.limits.limiter import Limits
from app.models import ChatSession
from tests.chat_helpers import ask, owner_connection
from tests.factories import LoggedIn, make_chatter, make_session

pytestmark = pytest.mark.committed

_BYTES = text(
    "SELECT (SELECT coalesce(sum(pg_column_size(c.*)), 0) FROM checkpoints c "
    "        WHERE thread_id = :t) "
    "     + (SELECT coalesce(sum(pg_column_size(b.*)), 0) FROM checkpoint_blobs b "
    "        WHERE thread_id = :t) "
    "     + (SELECT coalesce(sum(pg_column_size(w.*)), 0) FROM checkpoint_writes w "
    "        WHERE thread_id = :t)"
)
_LATEST_STEP_COUNT = text("SELECT count(*) FROM checkpoints WHERE thread_id = :t")


async def _turns(client: httpx.AsyncClient, who: LoggedIn, chat: ChatSession, n: int) -> None:
    for i in range(n):
        response = await ask(client, who, chat, f"Tell me something new, number {i}.")
        assert response.status_code == 200, response.text


async def _settled_bytes(settings: Settings, chat: ChatSession, checkpoints: int) -> int:
    """Checkpoint bytes of the thread once its last checkpoint is written (just after the
    answer) and pruned."""
    for _ in range(100):
        async with owner_connection(settings) as probe:
            if await probe.scalar(_LATEST_STEP_COUNT, {"t": str(chat.id)}) == checkpoints:
                return int(await probe.scalar(_BYTES, {"t": str(chat.id)}))
        await asyncio.sleep(0.05)
    raise AssertionError("checkpoints did not settle")


LONG = 60
"""Turns of the long session: 6 times the short one's 10, so linear growth (6x) and
quadratic growth (36x) are far apart."""


async def test_checkpoint_bytes_after_60_turns_stay_within_7_times_those_after_10(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, settings: Settings
) -> None:
    saver = app.state.resources.runner.graph.checkpointer
    keep = settings.checkpoints_per_thread
    assert saver.keep_checkpoints == keep == 3
    _tenant, user, pruned, owner = await make_chatter(client, db)
    unpruned = await make_session(db, user)
    limiter = app.state.resources.guards.limiter  # 120 quick turns: no limits for this test
    limiter.defaults = Limits(0, 0, 0, 0)

    await _turns(client, owner, pruned, 10)
    pruned_10 = await _settled_bytes(settings, pruned, keep)
    await _turns(client, owner, pruned, LONG - 10)
    pruned_long = await _settled_bytes(settings, pruned, keep)

    saver.keep_checkpoints = 0  # every checkpoint kept: growth itself must be linear
    await _turns(client, owner, unpruned, 10)
    unpruned_10 = await _settled_bytes(settings, unpruned, 10)
    await _turns(client, owner, unpruned, LONG - 10)
    unpruned_long = await _settled_bytes(settings, unpruned, LONG)

    assert pruned_long <= 2 * pruned_10  # bounded: the same few checkpoints, whatever the age
    assert unpruned_long <= 7.5 * unpruned_10  # linear (6x the turns), not quadratic (36x)
    assert unpruned_long > 3 * unpruned_10  # sanity: the measure sees the growth


async def test_the_checkpoint_keeps_the_outcome_not_the_turns_working_data(
    client: httpx.AsyncClient, db: AsyncSession, settings: Settings
) -> None:
    """The request, history, passages, prompt and sources are rebuilt every turn: no blob of
    them is written, and the checkpoint row does not carry them inline either."""
    _tenant, _user, chat, owner = await make_chatter(client, db)
    await _turns(client, owner, chat, 2)
    await _settled_bytes(settings, chat, 2)
    async with owner_connection(settings) as probe:
        stored = set(
            (
                await probe.execute(
                    text(
                        "SELECT DISTINCT channel FROM checkpoint_blobs WHERE thread_id = :t "
                        "UNION SELECT jsonb_object_keys(checkpoint -> 'channel_values') "
                        "FROM checkpoints WHERE thread_id = :t"
                    ),
                    {"t": str(chat.id)},
                )
            ).scalars()
        )
    assert {"answer", "context_metadata", "status", "query_composition"} <= stored
    working = {
        "request_messages",
        "stored_query",
        "client_history",
        "history",
        "summary",
        "awaiting_summary",
        "recent_turns",
        "passages",
        "prompt",
        "sources",
        "agent_messages",
    }
    assert not stored & working


async def test_the_final_checkpoint_keeps_only_the_turns_latency_of_its_manifest(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, settings: Settings
) -> None:
    """The manifest lives on the turn's row; the thread's last checkpoint (after persist) keeps
    only the latency of it, whatever the nodes merged into `context_metadata` on the way."""
    tenant, _user, chat, owner = await make_chatter(client, db)
    await _turns(client, owner, chat, 1)
    await _settled_bytes(settings, chat, 1)
    graph = app.state.resources.runner.graph
    CURRENT_TENANT.set(str(tenant.id))
    try:
        snapshot = await graph.aget_state({"configurable": {"thread_id": str(chat.id)}})
    finally:
        CURRENT_TENANT.set(None)
    assert set(snapshot.values["context_metadata"]) == {"latency_ms"}
