"""The saver's pooled connections change tenant between uses: a connection last used for one
tenant never shows that tenant's checkpoints to the next."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.conversation.checkpoints.checkpointer import CURRENT_TENANT, TenantScopedSaver, create_pool
from app.core.database_urls import resolve_database_urls
from tests.chat_helpers import ask, wait_for_checkpoints
from tests.factories import make_chatter

pytestmark = pytest.mark.committed


async def test_one_pooled_connection_serves_tenants_in_turn_without_leaking(
    client: httpx.AsyncClient, db: AsyncSession, settings: Settings
) -> None:
    first = await make_chatter(client, db)
    second = await make_chatter(client, db)
    for chatter in (first, second):
        response = await ask(client, chatter.owner, chatter.chat, "What is the travel policy?")
        assert response.status_code == 200
    await wait_for_checkpoints(settings, [str(first.chat.id), str(second.chat.id)])
    pool = create_pool(resolve_database_urls(settings).app_libpq(), max_size=1)
    await pool.open()
    saver = TenantScopedSaver(pool)  # one connection: every use below reuses it

    async def visible(tenant: str, thread: str) -> bool:
        CURRENT_TENANT.set(tenant)
        found = await saver.aget_tuple({"configurable": {"thread_id": thread}})
        return found is not None

    try:
        mine, theirs = str(first.chat.id), str(second.chat.id)
        for _ in range(2):  # back and forth on the same connection
            assert await visible(str(first.tenant.id), mine)
            assert not await visible(str(first.tenant.id), theirs)
            assert await visible(str(second.tenant.id), theirs)
            assert not await visible(str(second.tenant.id), mine)
    finally:
        CURRENT_TENANT.set(None)
        await pool.close()
