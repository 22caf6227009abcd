"""Passwords that are only whitespace are refused; secrets are never cached; no sniffing."""

from __future__ import annotations

import httpx
import pytest
from argon2 import Type, extract_parameters
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth import service
from app.config import Settings
from app.core.db import scope_to_tenant
from app.core.errors import UnprocessableEntity
from app.models import User
from tests.factories import DEFAULT_PASSWORD, login, make_tenant, make_user

BLANK = [" " * 8, " " * 40, "\t" * 8, "\n \t \r\n  ", "   abc    ", "\u3000" * 8, "  seven7  "]


@pytest.mark.parametrize("password", BLANK, ids=repr)
async def test_a_whitespace_password_is_refused(
    client: httpx.AsyncClient, db: AsyncSession, password: str
) -> None:
    admin = await login(client, await make_user(db, await make_tenant(db), role="admin"))
    response = await client.post(
        "/admin/users",
        json={"email": "new@example.com", "password": password, "role": "member"},
        headers=admin.headers,
    )
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "weak_password"


async def test_every_way_to_set_a_password_refuses_blank_ones(
    db: AsyncSession, settings: Settings
) -> None:
    """The CLI's `create-user` and the demo go through the same service."""
    tenant = await make_tenant(db)
    with pytest.raises(UnprocessableEntity):
        await service.create_user(
            db, settings, tenant.id, email="cli@example.com", password=" " * 12, role="admin"
        )


async def test_a_padded_password_long_enough_is_kept_as_given(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    admin = await login(client, await make_user(db, await make_tenant(db), role="admin"))
    created = await client.post(
        "/admin/users",
        json={"email": "pad@example.com", "password": "  long enough  ", "role": "member"},
        headers=admin.headers,
    )
    assert created.status_code == 201
    ok = await client.post(
        "/auth/token", json={"email": "pad@example.com", "password": "  long enough  "}
    )
    assert ok.status_code == 200


async def test_responses_with_secrets_are_not_stored(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    user = await make_user(db, await make_tenant(db), role="admin")
    token = await client.post(
        "/auth/token", json={"email": user.email, "password": DEFAULT_PASSWORD}
    )
    assert token.status_code == 200
    refreshed = await client.post(
        "/auth/refresh", json={"refresh_token": token.json()["refresh_token"]}
    )
    assert refreshed.status_code == 200
    headers = {"Authorization": f"Bearer {refreshed.json()['access_token']}"}
    key = await client.post(
        "/admin/api-keys", json={"name": "ci", "role": "member"}, headers=headers
    )
    assert key.status_code == 201
    for response in (token, refreshed, key):
        assert response.headers["cache-control"] == "no-store", response.url


async def test_every_response_says_nosniff(client: httpx.AsyncClient, db: AsyncSession) -> None:
    user = await make_user(db, await make_tenant(db))
    who = await login(client, user)
    responses = [
        await client.get("/healthz"),
        await client.get("/me", headers=who.headers),
        await client.get("/me"),  # 401
        await client.get("/no-such-path"),  # 404
        await client.post(
            "/auth/token", content=b"{", headers={"content-type": "application/json"}
        ),
        await client.post("/auth/token", content=b"x", headers={"content-type": "text/plain"}),
        await client.get("/openapi.json"),
    ]
    for response in responses:
        assert response.headers["x-content-type-options"] == "nosniff", response.url


async def test_a_password_the_product_sets_is_hashed_with_argon2ids_full_cost(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    """The factories' users carry cheap hashes to keep the suite fast; every hash the
    product makes itself costs what argon2-cffi's defaults cost (RFC 9106's second
    recommendation: 64 MiB, 3 passes), whatever the tests' hashes are."""
    tenant = await make_tenant(db)
    admin = await login(client, await make_user(db, tenant, role="admin"))
    created = await client.post(
        "/admin/users",
        json={"email": "costly@example.com", "password": "a long passphrase", "role": "member"},
        headers=admin.headers,
    )
    assert created.status_code == 201, created.text
    await scope_to_tenant(db, tenant.id)
    stored = await db.scalar(select(User.password_hash).where(User.email == "costly@example.com"))
    await db.commit()
    parameters = extract_parameters(str(stored))
    assert parameters.type is Type.ID
    assert (parameters.memory_cost, parameters.time_cost) == (65536, 3)
    signed_in = await client.post(
        "/auth/token", json={"email": "costly@example.com", "password": "a long passphrase"}
    )
    assert signed_in.status_code == 200, signed_in.text
