"""The history cache against real Redis: an older snapshot never replaces a newer one."""

from __future__ import annotations

import uuid

from fastapi import FastAPI

from app.chat.history import HistorySnapshot
from app.graph.state import HistoryTurn


def snapshot(total: int) -> HistorySnapshot:
    turns = [
        HistoryTurn(turn_id=str(i), user_query=f"q{i}", answer=f"a{i}", status="complete")
        for i in range(total)
    ]
    return HistorySnapshot(turns=turns, total=total, summary="", summarized_turns=0)


async def test_a_late_older_snapshot_does_not_overwrite_a_newer_one(app: FastAPI) -> None:
    history = app.state.resources.history
    tenant, session = uuid.uuid4(), uuid.uuid4()
    await history.store(tenant, session, snapshot(3))
    await history.store(tenant, session, snapshot(2))  # a slower, earlier turn finishing last
    cached, source = await history.load(None, tenant, session)
    assert source == "cache"
    assert cached["total"] == 3
    await history.store(tenant, session, snapshot(4))
    cached, _ = await history.load(None, tenant, session)
    assert cached["total"] == 4
