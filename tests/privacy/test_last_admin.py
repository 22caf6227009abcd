"""A tenant keeps at least one admin: erasing the last one is 409 `last_admin`."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.db import scope_to_tenant
from app.models import User
from tests.factories import login, make_tenant, make_user

pytestmark = pytest.mark.committed


async def _admins(db: AsyncSession, tenant_id: object) -> int:
    await scope_to_tenant(db, tenant_id)  # type: ignore[arg-type]
    count = await db.scalar(select(func.count()).select_from(User).where(User.role == "admin"))
    await db.commit()
    return int(count or 0)


async def test_the_last_admin_cannot_be_erased(client: httpx.AsyncClient, db: AsyncSession) -> None:
    tenant = await make_tenant(db)
    admin = await login(client, await make_user(db, tenant, role="admin"))
    member = await login(client, await make_user(db, tenant))

    itself = await client.delete("/me", headers=admin.headers)
    assert itself.status_code == 409, itself.text
    assert itself.json()["error"]["code"] == "last_admin"
    by_id = await client.delete(f"/admin/users/{admin.user.id}", headers=admin.headers)
    assert by_id.status_code == 409
    assert by_id.json()["error"]["code"] == "last_admin"
    assert await _admins(db, tenant.id) == 1
    assert (await client.get("/me", headers=admin.headers)).status_code == 200

    # Members go as before, and so does an admin who is not the last.
    assert (await client.delete("/me", headers=member.headers)).status_code == 200
    second = await login(client, await make_user(db, tenant, role="admin"))
    assert (await client.delete("/me", headers=second.headers)).status_code == 200


async def test_two_admins_erasing_each_other_at_once_leave_one(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    first = await login(client, await make_user(db, tenant, role="admin"))
    second = await login(client, await make_user(db, tenant, role="admin"))
    responses = await asyncio.gather(
        client.delete(f"/admin/users/{second.user.id}", headers=first.headers),
        client.delete(f"/admin/users/{first.user.id}", headers=second.headers),
    )
    assert await _admins(db, tenant.id) == 1
    assert sorted(r.status_code for r in responses) in ([200, 401], [200, 409])
