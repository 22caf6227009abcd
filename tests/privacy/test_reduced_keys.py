"""A key with less than its account's role (a member key of an admin) does on `/me` no more
than that role allows: it cannot erase the account, and its export holds no other key's
details nor the account's admin actions (docs/adr/0047)."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncSession

from tests.factories import LoggedIn, login, make_tenant, make_user

pytestmark = pytest.mark.committed


async def _key(client: httpx.AsyncClient, admin: LoggedIn, name: str, role: str) -> dict[str, str]:
    created = await client.post(
        "/admin/api-keys", json={"name": name, "role": role}, headers=admin.headers
    )
    assert created.status_code == 201, created.text
    body: dict[str, str] = created.json()
    return body


async def test_a_member_key_of_an_admin_cannot_erase_the_admin(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    admin = await login(client, await make_user(db, tenant, role="admin"))
    await make_user(db, tenant, role="admin")  # not the last admin: erasure is otherwise allowed
    member_key = await _key(client, admin, "bot", "member")

    refused = await client.delete("/me", headers={"X-API-Key": member_key["key"]})

    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["code"] == "whole_account_required"
    assert (await client.get("/me", headers=admin.headers)).status_code == 200
    assert (await client.get("/me", headers={"X-API-Key": member_key["key"]})).status_code == 200
    # The account's own login still may.
    assert (await client.delete("/me", headers=admin.headers)).status_code == 200


async def test_an_admin_key_of_an_admin_may_erase_it_like_its_login(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    admin = await login(client, await make_user(db, tenant, role="admin"))
    await make_user(db, tenant, role="admin")
    admin_key = await _key(client, admin, "ops", "admin")

    erased = await client.delete("/me", headers={"X-API-Key": admin_key["key"]})

    assert erased.status_code == 200, erased.text
    assert erased.json()["deleted"]["users"] == 1


async def test_a_member_key_exports_neither_other_keys_nor_admin_actions(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    admin = await login(client, await make_user(db, tenant, role="admin"))
    member_key = await _key(client, admin, "bot", "member")
    admin_key = await _key(client, admin, "ops", "admin")
    assert (await client.get("/admin/audit/turns", headers=admin.headers)).status_code == 200
    as_key = {"X-API-Key": member_key["key"]}
    assert (await client.get("/admin/api-keys", headers=as_key)).status_code == 403

    response = await client.get("/me/export", headers=as_key)

    assert response.status_code == 200, response.text
    export = response.json()
    assert [k["id"] for k in export["api_keys"]] == [member_key["id"]]
    assert admin_key["id"] not in response.text
    assert admin_key["prefix"] not in response.text
    assert export["audit_actions"] == []
    assert export["withheld"] == ["api_keys", "audit_actions"]

    # The admin's own login exports the whole account, as before.
    whole = (await client.get("/me/export", headers=admin.headers)).json()
    assert {k["id"] for k in whole["api_keys"]} == {member_key["id"], admin_key["id"]}
    assert [a["action"] for a in whole["audit_actions"]] == ["audit.turns.list"]
    assert whole["withheld"] == []
    # So does a key with the account's whole role.
    by_admin_key = await client.get("/me/export", headers={"X-API-Key": admin_key["key"]})
    assert len(by_admin_key.json()["api_keys"]) == 2
