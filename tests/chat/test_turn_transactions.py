"""The unit of work of a turn (issue 27, item 4; ADR 0070): one `/chat` turn, offline (no
model, the extractive responder) and with the fake chat model, costs PostgreSQL at most 4
transactions and 20 statements besides BEGIN/COMMIT/ROLLBACK, the LangGraph checkpointer's
included — counted by the server itself (`pg_stat_database`, `pg_stat_statements`), on a
server of the test's own when the run's does not load `pg_stat_statements`."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import asyncpg
import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession
from sqlalchemy.pool import QueuePool

from app.config import Settings
from app.core import migrate
from app.core.database_urls import resolve_database_urls
from app.core.db import create_engine, create_sessionmaker
from app.main import create_app
from bench.turn_transactions import TurnCounts, count_per_turn
from tests.chat_helpers import add_kb_document, use_model
from tests.conftest import create_database, drop_database, make_settings
from tests.factories import login, make_session, make_tenant, make_user
from tests.fakes import ScriptedChatModel, responder
from tests.services import ServiceMissing, require_service, statement_counting_postgres

TURNS = 3
MAX_TRANSACTIONS = 4
MAX_STATEMENTS = 20
FIRST = "How long do I have to ask for a refund?"
FOLLOW_UP = "And how do annual plans get refunded?"
STANDALONE = "Where does a refund request go?"
"""With a model, a question that leans on the conversation is rewritten by it first: the
read transaction ends before that call, and a second one serves retrieval (ADR 0070)."""
REFUNDS = (
    "Refunds are issued within 14 days of purchase. Annual plans are refunded pro rata. "
    "A refund request goes to billing@example.com with the order number."
)


@pytest.fixture(scope="module")
def counting_server() -> Iterator[URL]:
    try:
        with statement_counting_postgres() as server:
            yield server.admin_url
    except ServiceMissing as exc:
        require_service(str(exc))


@pytest.fixture
async def counted_settings(counting_server: URL, redis_url: str) -> AsyncIterator[Settings]:
    """A migrated database of the test's own on the counting server."""
    name = f"threadline_uow_{uuid.uuid4().hex[:10]}"
    owner = await create_database(counting_server, name)
    # Nothing periodic runs while turns are counted (a lease renewal, a sweep, the tenant
    # policy's refresh every 30 s: 2 statements in the read transaction, when it comes).
    quiet = {
        "turn_lease_seconds": 3600,
        "turn_lease_renew_seconds": 600,
        "turn_sweep_seconds": 3600,
    }
    settings = make_settings(
        owner, redis_url, **quiet, ingestion_recovery_seconds=3600, tenant_policy_cache_seconds=3600
    )
    await migrate.upgrade(settings, resolve_database_urls(settings).owner)
    admin = await asyncpg.connect(_libpq(counting_server))
    try:
        await admin.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    finally:
        await admin.close()
    yield settings
    await drop_database(counting_server, name)


def _libpq(url: URL) -> str:
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


async def _count_turns(settings: Settings, counting_server: URL, *, model: bool) -> TurnCounts:
    engine = create_engine(resolve_database_urls(settings).app)
    async with create_sessionmaker(engine)() as db:
        tenant = await make_tenant(db)
        user = await make_user(db, tenant)
        await add_kb_document(db, tenant, "Refund policy", [REFUNDS])
        sessions = [await make_session(db, user) for _ in range(TURNS + 2)]
    await engine.dispose()
    app = create_app(settings)
    admin = await asyncpg.connect(_libpq(counting_server))
    try:
        async with app.router.lifespan_context(app):
            resources = app.state.resources
            if model:
                reply = ScriptedChatModel(reply=lambda _: "Refunds take 14 days [1].")
                resources.turn_context.responder = responder(reply)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                who = [await login(client, user) for _ in sessions]  # logging in is no turn
                for session, caller in zip(sessions, who, strict=True):
                    first = await client.post(
                        "/chat",
                        json={"session_id": str(session.id), "message": FIRST},
                        headers=caller.headers,
                    )
                    assert first.status_code == 200, first.text

                async def ask(i: int) -> None:
                    answer = await client.post(
                        "/chat",
                        json={"session_id": str(sessions[i].id), "message": question},
                        headers=who[i].headers,
                    )
                    assert answer.status_code == 200, answer.text
                    assert answer.json()["answer"]

                database = make_url(settings.database_url or "").database or ""
                question = STANDALONE if model else FOLLOW_UP
                return await count_per_turn(resources, admin, database, ask, TURNS)
    finally:
        await admin.close()


@pytest.mark.parametrize(
    "model",
    [False, True],
    ids=["offline", "fake-model"],
)
async def test_a_chat_turn_costs_at_most_four_transactions(
    counted_settings: Settings, counting_server: URL, model: bool
) -> None:
    counts = await _count_turns(counted_settings, counting_server, model=model)
    detail = "\n".join(f"{n:4.1f}  {q[:100]}" for q, n in counts.statements.items())
    # Counted at all (a window that saw nothing would pass any budget).
    assert counts.transactions > 0 and counts.work > 0, detail
    assert counts.transactions <= MAX_TRANSACTIONS, detail


async def test_an_offline_chat_turn_costs_at_most_twenty_statements(
    counted_settings: Settings, counting_server: URL
) -> None:
    counts = await _count_turns(counted_settings, counting_server, model=False)
    detail = "\n".join(f"{n:4.1f}  {q[:100]}" for q, n in counts.statements.items())
    assert counts.work > 0, detail
    assert counts.work <= MAX_STATEMENTS, detail


async def test_no_pooled_connection_is_held_while_the_model_answers(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, app_engine: AsyncEngine
) -> None:
    """The turn's read transaction is committed before each model call: the follow-up's
    rewrite and the answer (ADR 0070)."""
    tenant = await make_tenant(db)
    user = await make_user(db, tenant)
    await add_kb_document(db, tenant, "Refund policy", [REFUNDS])
    chat = await make_session(db, user)
    who = await login(client, user)
    pool = app_engine.pool
    assert isinstance(pool, QueuePool)
    held: list[int] = []

    def reply(_: object) -> str:
        held.append(pool.checkedout())
        return "Refunds take 14 days [1]."

    use_model(app, ScriptedChatModel(reply=reply))
    idle = pool.checkedout()  # the test's own connection
    for question in (FIRST, FOLLOW_UP):
        answer = await client.post(
            "/chat", json={"session_id": str(chat.id), "message": question}, headers=who.headers
        )
        assert answer.status_code == 200, answer.text
    assert len(held) >= 3  # two answers and the follow-up's rewrite
    assert held == [idle] * len(held)
