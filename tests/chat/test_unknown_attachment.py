"""A chat request naming an attachment that is not the caller's is 404 and stores no turn."""

from __future__ import annotations

import uuid

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.db import scope_to_tenant
from app.models import QueryHistory
from tests.chat_helpers import ask
from tests.factories import login, make_chatter, make_tenant, make_user

pytestmark = pytest.mark.committed


async def _turns(db: AsyncSession, tenant_id: uuid.UUID) -> int:
    await scope_to_tenant(db, tenant_id)
    count = await db.scalar(select(func.count()).select_from(QueryHistory))
    await db.commit()
    return int(count or 0)


async def test_an_unknown_attachment_is_404_and_stores_nothing(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant, _, chat, owner = await make_chatter(client, db)
    stranger = await login(client, await make_user(db, await make_tenant(db)))
    foreign = await client.post(
        "/attachments",
        files={"file": ("x.txt", b"Someone else's notes.")},
        headers=stranger.headers,
    )
    assert foreign.status_code == 201
    for attachment in (str(uuid.uuid4()), foreign.json()["id"]):
        response = await ask(client, owner, chat, "What does it say?", [attachment])
        assert response.status_code == 404, response.text
        assert response.json()["error"]["code"] == "attachment_not_found"
        streamed = await client.post(
            "/chat/stream",
            json={"session_id": str(chat.id), "message": "And?", "attachment_ids": [attachment]},
            headers=owner.headers,
        )
        assert streamed.status_code == 404
    assert await _turns(db, tenant.id) == 0
