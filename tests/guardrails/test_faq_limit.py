"""The FAQ cap holds under concurrent additions (each request on its own connection)."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncSession

from app.faqs import service as faq_service
from tests.factories import login, make_tenant, make_user

pytestmark = pytest.mark.committed


async def test_concurrent_additions_stop_at_the_cap(
    client: httpx.AsyncClient, db: AsyncSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(faq_service, "MAX_FAQS", 3)
    admin = await login(client, await make_user(db, await make_tenant(db), role="admin"))
    responses = await asyncio.gather(
        *(
            client.post(
                "/admin/faqs",
                json={"question": f"What is rule number {i}?", "answer": f"Rule {i}."},
                headers=admin.headers,
            )
            for i in range(8)
        )
    )
    assert sorted(r.status_code for r in responses) == [201] * 3 + [409] * 5
    refused = next(r for r in responses if r.status_code == 409)
    assert refused.json()["error"]["code"] == "faq_limit"
    listed = await client.get("/admin/faqs", headers=admin.headers)
    assert len(listed.json()["items"]) == 3
