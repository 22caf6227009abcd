"""The API right after its Redis restarts (a private redis-server): Idempotency-Keys hold,
`/readyz` sees Redis up."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine

from app.config import Settings
from app.core.database_urls import resolve_database_urls
from app.core.db import create_sessionmaker, scope_to_tenant
from app.main import create_app
from app.models import QueryHistory
from tests.chat_helpers import use_model
from tests.factories import make_chatter
from tests.fakes import ScriptedChatModel
from tests.private_redis import PrivateRedis, private_redis

pytestmark = pytest.mark.committed

KEYS, COPIES = 12, 5


@pytest.fixture
def server() -> Iterator[PrivateRedis]:
    with private_redis() as running:
        yield running


@pytest.fixture
async def roomy_sessionmaker(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession]
) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    """Committed sessions (the `sessionmaker` fixture truncates after) from a pool wide enough
    for every request of a burst: a retry waiting for the first answer holds a connection."""
    engine = create_async_engine(
        resolve_database_urls(settings).app, pool_size=KEYS * COPIES, max_overflow=10
    )
    yield create_sessionmaker(engine)
    await engine.dispose()


async def test_right_after_a_restart_each_key_runs_once_and_readyz_sees_redis(
    settings: Settings,
    roomy_sessionmaker: async_sessionmaker[AsyncSession],
    db: AsyncSession,
    server: PrivateRedis,
) -> None:
    bound = settings.model_copy(
        update={
            "redis_url": server.url,
            "rate_limit_user_per_min": 0,
            "rate_limit_tenant_per_min": 0,
            "max_in_flight_per_credential": 0,  # one user's 60 requests at once, on purpose
        }
    )
    application = create_app(bound)
    async with application.router.lifespan_context(application):
        application.state.resources.use_sessionmaker(roomy_sessionmaker)
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://t.test") as client:
            tenant, _user, chat, owner = await make_chatter(client, db)
            model = ScriptedChatModel(reply=lambda _: "an answer", token_delay=0.005)
            use_model(application, model)

            async def burst(label: str) -> list[httpx.Response]:
                return await asyncio.gather(
                    *(
                        client.post(
                            "/chat",
                            json={"session_id": str(chat.id), "message": f"{label} {k}"},
                            headers={**owner.headers, "Idempotency-Key": f"{label}-{k}"},
                        )
                        for k in range(KEYS)
                        for _ in range(COPIES)
                    )
                )

            warm = await burst("before")  # fills the pool with connections the restart kills
            assert {r.status_code for r in warm} == {200}
            server.restart()

            ready = await client.get("/readyz")
            assert ready.json()["checks"]["redis"]["status"] == "ok"
            after = await burst("after")
            assert [r.status_code for r in after] == [200] * KEYS * COPIES, after[0].text
            for k in range(KEYS):
                copies = after[k * COPIES : (k + 1) * COPIES]
                assert len({r.json()["turn_id"] for r in copies}) == 1

    await scope_to_tenant(db, tenant.id)
    rows = await db.scalar(
        select(func.count()).select_from(QueryHistory).where(QueryHistory.session_id == chat.id)
    )
    await db.commit()
    assert rows == 2 * KEYS  # one turn per key, before and after the restart
    assert len(model.answer_prompts()) == 2 * KEYS
