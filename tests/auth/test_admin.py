"""Roles, user creation by tenant admins, and API keys."""

from __future__ import annotations

import httpx
from sqlalchemy.ext.asyncio import AsyncSession

from tests.factories import login, make_tenant, make_user


async def test_admin_creates_a_user_who_can_log_in(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    admin = await login(client, await make_user(db, await make_tenant(db), role="admin"))
    created = await client.post(
        "/admin/users",
        json={"email": "New.Person@Example.com", "password": "long enough pw", "role": "member"},
        headers=admin.headers,
    )
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["email"] == "new.person@example.com"
    assert body["role"] == "member"
    assert body["tenant_id"] == str(admin.user.tenant_id)

    token = await client.post(
        "/auth/token", json={"email": "new.person@example.com", "password": "long enough pw"}
    )
    assert token.status_code == 200


async def test_admin_user_creation_rejects_duplicates_weak_passwords_and_bad_roles(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    admin = await login(client, await make_user(db, tenant, role="admin"))
    existing = await make_user(db, tenant)
    duplicate = await client.post(
        "/admin/users",
        json={"email": existing.email, "password": "long enough pw"},
        headers=admin.headers,
    )
    assert duplicate.status_code == 409
    assert duplicate.json()["error"]["code"] == "user_exists"

    weak = await client.post(
        "/admin/users", json={"email": "w@example.com", "password": "short"}, headers=admin.headers
    )
    assert weak.status_code == 422
    assert weak.json()["error"]["code"] == "weak_password"

    bad_role = await client.post(
        "/admin/users",
        json={"email": "r@example.com", "password": "long enough pw", "role": "owner"},
        headers=admin.headers,
    )
    assert bad_role.status_code == 422


async def test_same_email_may_exist_in_another_tenant(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    other = await make_user(db, await make_tenant(db))
    admin = await login(client, await make_user(db, await make_tenant(db), role="admin"))
    response = await client.post(
        "/admin/users",
        json={"email": other.email, "password": "long enough pw"},
        headers=admin.headers,
    )
    assert response.status_code == 201


async def test_members_cannot_use_admin_endpoints(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    member = await login(client, await make_user(db, await make_tenant(db)))
    for path, body in (
        ("/admin/users", {"email": "x@example.com", "password": "long enough pw"}),
        ("/admin/api-keys", {"name": "k"}),
    ):
        response = await client.post(path, json=body, headers=member.headers)
        assert response.status_code == 403, path
        assert response.json()["error"]["code"] == "admin_required"


async def test_api_key_authenticates_as_its_creator_until_revoked(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    admin = await login(client, await make_user(db, await make_tenant(db), role="admin"))
    created = await client.post("/admin/api-keys", json={"name": "ci"}, headers=admin.headers)
    assert created.status_code == 201
    key = created.json()["key"]
    assert key.startswith("tl_")

    me = await client.get("/me", headers={"X-API-Key": key})
    assert me.status_code == 200
    assert me.json()["id"] == str(admin.user.id)
    assert me.json()["role"] == "member"  # the key's role caps the creator's

    listed = await client.get("/admin/api-keys", headers=admin.headers)
    assert [k["name"] for k in listed.json()] == ["ci"]
    assert "key" not in listed.json()[0]

    revoked = await client.delete(f"/admin/api-keys/{created.json()['id']}", headers=admin.headers)
    assert revoked.status_code == 204
    after = await client.get("/me", headers={"X-API-Key": key})
    assert after.status_code == 401
    assert after.json()["error"]["code"] == "invalid_api_key"


async def test_a_member_key_cannot_reach_admin_endpoints_but_an_admin_key_can(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    admin = await login(client, await make_user(db, await make_tenant(db), role="admin"))
    member_key = (
        await client.post("/admin/api-keys", json={"name": "m"}, headers=admin.headers)
    ).json()["key"]
    admin_key = (
        await client.post(
            "/admin/api-keys", json={"name": "a", "role": "admin"}, headers=admin.headers
        )
    ).json()["key"]
    body = {"name": "via-key"}
    assert (
        await client.post("/admin/api-keys", json=body, headers={"X-API-Key": member_key})
    ).status_code == 403
    assert (
        await client.post("/admin/api-keys", json=body, headers={"X-API-Key": admin_key})
    ).status_code == 201


async def test_unknown_api_key_is_401(client: httpx.AsyncClient) -> None:
    response = await client.get("/me", headers={"X-API-Key": "tl_not-a-real-key"})
    assert response.status_code == 401


async def test_a_demoted_admin_loses_admin_rights_at_once(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    user = await make_user(db, await make_tenant(db), role="admin")
    admin = await login(client, user)
    user.role = "member"
    await db.commit()
    response = await client.post("/admin/api-keys", json={"name": "k"}, headers=admin.headers)
    assert response.status_code == 403
