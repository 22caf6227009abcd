"""The history cache against real Redis: an older snapshot never replaces a newer one."""

from __future__ import annotations

import uuid

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession

from app.conversation.history import HistorySnapshot
from app.conversation.turn.types import HistoryTurn
from app.core.db import scope_to_tenant
from tests.chat_helpers import ask, use_model
from tests.factories import make_chatter
from tests.fakes import ScriptedChatModel


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


@pytest.mark.committed  # the checkpointer's own connections must see the session
async def test_the_cache_extended_turn_by_turn_equals_a_rebuild_from_postgres(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    """persist extends the cached snapshot instead of re-reading it: after several turns,
    with older ones folded into the summary, it must hold exactly what PostgreSQL holds."""
    history = app.state.resources.history
    history.limit = 2  # a short window: turns leave it, and are folded into the summary
    tenant, _user, chat, owner = await make_chatter(client, db)
    use_model(app, ScriptedChatModel(reply=lambda _: "Answered from the documents."))
    for i in range(7):
        response = await ask(client, owner, chat, f"What is the policy number {i}?")
        assert response.status_code == 200, response.text
    await app.state.resources.jobs.drain()  # the background fold after the 7th turn

    cached, source = await history.load(db, tenant.id, chat.id)
    assert source == "cache"
    await scope_to_tenant(db, tenant.id)
    rebuilt = await history.snapshot(db, tenant.id, chat.id)
    assert cached == rebuilt
    assert rebuilt["total"] == 7 and rebuilt["summarized_turns"] > 0 and rebuilt["summary"]


@pytest.mark.committed
async def test_a_stale_cached_history_is_read_again_from_postgres(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    """The cache write after a turn's commit failed (a Redis blip, or the process died in
    between): the next turn still sees that turn, since the cached snapshot does not count
    what the admission counted."""
    history = app.state.resources.history
    redis = app.state.resources.redis.client
    tenant, _user, chat, owner = await make_chatter(client, db)
    model = ScriptedChatModel(reply=lambda _: "Answered from the documents.")
    use_model(app, model)
    key = history.key(tenant.id, chat.id)
    assert (await ask(client, owner, chat, "What is the refund window?")).status_code == 200
    before = await redis.get(key)
    assert before is not None
    assert (await ask(client, owner, chat, "And for gift cards bought abroad?")).status_code == 200
    await redis.set(key, before)  # as if the second turn's cache write had failed

    third = await ask(client, owner, chat, "Anything else to know?")
    assert third.status_code == 200, third.text
    assert third.json()["context_metadata"]["history_source"] == "database"  # seen as stale
    prompt = " ".join(str(m.content) for m in model.answer_prompts()[-1])
    assert "And for gift cards bought abroad?" in prompt
