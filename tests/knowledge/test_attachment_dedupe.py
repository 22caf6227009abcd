"""Concurrent identical attachment uploads store one row: the first is 201, every other one
200 with the same id (the knowledge base's convention)."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.db import scope_to_tenant
from app.models import Attachment
from tests.factories import login, make_tenant, make_user

pytestmark = pytest.mark.committed  # concurrent requests, each on its own connection


async def test_twenty_concurrent_identical_uploads_store_one_row(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    user = await make_user(db, await make_tenant(db))
    owner = await login(client, user)
    data = b"Minutes of the board meeting: the budget was approved.\n" * 20
    uploads = [
        client.post("/attachments", files={"file": ("minutes.txt", data)}, headers=owner.headers)
        for _ in range(20)
    ]
    responses = await asyncio.gather(*uploads)
    await app.state.resources.jobs.drain()

    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] * 19 + [201], [r.text for r in responses if r.status_code >= 300]
    assert len({r.json()["id"] for r in responses}) == 1
    await scope_to_tenant(db, user.tenant_id)
    stored = await db.scalar(
        select(func.count()).select_from(Attachment).where(Attachment.user_id == user.id)
    )
    assert stored == 1


async def test_the_same_file_of_another_user_is_their_own(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    data = b"Shared handbook text, uploaded by two colleagues."
    ids = set()
    for _ in range(2):
        who = await login(client, await make_user(db, tenant))
        response = await client.post(
            "/attachments", files={"file": ("handbook.txt", data)}, headers=who.headers
        )
        assert response.status_code == 201
        ids.add(response.json()["id"])
    await app.state.resources.jobs.drain()
    assert len(ids) == 2
