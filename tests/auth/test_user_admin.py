"""An admin runs their tenant's users: list and search, role, disable and enable (every
credential of a disabled user stops at once), password reset; never another tenant's users,
and never as a member."""

from __future__ import annotations

import uuid

import httpx
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.db import scope_to_tenant
from app.models import AuditLog
from tests.factories import DEFAULT_PASSWORD, login, make_session, make_tenant, make_user


async def test_the_list_shows_the_tenants_users_with_status_sign_in_and_conversations(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    admin = await login(client, await make_user(db, tenant, role="admin", email="boss@a.test"))
    talker = await make_user(db, tenant, email="talker@a.test")
    for _ in range(3):
        await make_session(db, talker)
    for i in range(4):
        await make_user(db, tenant, email=f"quiet{i}@a.test")
    await make_user(db, await make_tenant(db), email="stranger@b.test")

    page = await client.get("/admin/users", headers=admin.headers)
    assert page.status_code == 200, page.text
    emails = [u["email"] for u in page.json()["items"]]
    assert emails == sorted(emails) and "stranger@b.test" not in emails
    assert len(emails) == 6
    by_email = {u["email"]: u for u in page.json()["items"]}
    assert by_email["talker@a.test"]["conversations"] == 3
    assert by_email["talker@a.test"]["last_login_at"] is None
    assert by_email["boss@a.test"]["last_login_at"] is not None  # signed in above
    assert by_email["boss@a.test"]["status"] == "active"

    found = await client.get("/admin/users", params={"q": "QUIET"}, headers=admin.headers)
    assert [u["email"] for u in found.json()["items"]] == [f"quiet{i}@a.test" for i in range(4)]
    like = await client.get("/admin/users", params={"q": "%"}, headers=admin.headers)
    assert like.json()["items"] == [], "% is a character to find, not a wildcard"

    seen: list[str] = []
    cursor: str | None = None
    while True:
        params = {"limit": "4", **({"cursor": cursor} if cursor else {})}
        chunk = (await client.get("/admin/users", params=params, headers=admin.headers)).json()
        seen += [u["email"] for u in chunk["items"]]
        cursor = chunk["next_cursor"]
        if not cursor:
            break
    assert seen == emails
    bad = await client.get("/admin/users", params={"cursor": "%%%"}, headers=admin.headers)
    assert bad.status_code == 400


async def test_a_member_gets_403_and_another_tenants_user_is_404(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    admin = await login(client, await make_user(db, tenant, role="admin"))
    member = await login(client, await make_user(db, tenant))
    mine = await make_user(db, tenant)
    theirs = await make_user(db, await make_tenant(db))

    calls: tuple[tuple[str, str, dict[str, object] | None], ...] = (
        ("GET", "/admin/users", None),
        ("GET", f"/admin/users/{mine.id}", None),
        ("PATCH", f"/admin/users/{mine.id}", {"role": "admin"}),
        ("POST", f"/admin/users/{mine.id}/password", None),
    )
    for method, path, body in calls:
        refused = await client.request(method, path, json=body, headers=member.headers)
        assert refused.status_code == 403, (method, path)
        assert refused.json()["error"]["code"] == "admin_required"

    calls = (
        ("GET", f"/admin/users/{theirs.id}", None),
        ("PATCH", f"/admin/users/{theirs.id}", {"disabled": True}),
        ("POST", f"/admin/users/{theirs.id}/password", None),
        ("GET", f"/admin/users/{uuid.uuid4()}", None),
    )
    for method, path, body in calls:
        missing = await client.request(method, path, json=body, headers=admin.headers)
        assert missing.status_code == 404, (method, path)
    assert (await login(client, theirs)).headers, "the other tenant's user is untouched"


async def test_a_disabled_users_tokens_keys_and_password_stop_at_once_until_enabled(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    admin = await login(client, await make_user(db, tenant, role="admin"))
    user = await make_user(db, tenant, role="admin")  # an admin, so they can make a key
    session = await login(client, user)
    key = (
        await client.post("/admin/api-keys", json={"name": "k"}, headers=session.headers)
    ).json()["key"]
    assert (await client.get("/me", headers={"X-API-Key": key})).status_code == 200

    disabled = await client.patch(
        f"/admin/users/{user.id}", json={"disabled": True}, headers=admin.headers
    )
    assert disabled.status_code == 200, disabled.text
    assert disabled.json()["status"] == "disabled" and disabled.json()["disabled_at"]

    for headers in (session.headers, {"X-API-Key": key}):
        me = await client.get("/me", headers=headers)
        assert me.status_code == 401
        assert me.json()["error"]["code"] == "account_disabled"
    refresh = await client.post("/auth/refresh", json={"refresh_token": session.refresh_token})
    assert refresh.status_code == 401
    creds = {"email": user.email, "password": DEFAULT_PASSWORD}
    relogin = await client.post("/auth/token", json=creds)
    assert relogin.status_code == 401 and relogin.json()["error"]["code"] == "account_disabled"
    wrong = await client.post("/auth/token", json={**creds, "password": "not the password"})
    assert wrong.json()["error"]["code"] == "invalid_credentials", "no hint without the password"

    enabled = await client.patch(
        f"/admin/users/{user.id}", json={"disabled": False}, headers=admin.headers
    )
    assert enabled.json()["status"] == "active"
    assert (await client.get("/me", headers={"X-API-Key": key})).status_code == 200
    # The logins that were open when they were disabled stay ended.
    assert (await client.get("/me", headers=session.headers)).status_code == 401
    assert (await client.post("/auth/token", json=creds)).status_code == 200


async def test_role_change_takes_effect_at_once_and_an_admin_cannot_demote_or_disable_themselves(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    admin = await login(client, await make_user(db, tenant, role="admin"))
    member = await login(client, await make_user(db, tenant))
    assert (await client.get("/admin/users", headers=member.headers)).status_code == 403
    promoted = await client.patch(
        f"/admin/users/{member.user.id}", json={"role": "admin"}, headers=admin.headers
    )
    assert promoted.json()["role"] == "admin"
    assert (await client.get("/admin/users", headers=member.headers)).status_code == 200

    for change in ({"role": "member"}, {"disabled": True}):
        own = await client.patch(
            f"/admin/users/{admin.user.id}", json=change, headers=admin.headers
        )
        assert own.status_code == 409 and own.json()["error"]["code"] == "own_account"
    unknown = await client.patch(
        f"/admin/users/{member.user.id}", json={"role": "owner"}, headers=admin.headers
    )
    assert unknown.status_code == 422

    await scope_to_tenant(db, tenant.id)
    actions = (
        await db.scalars(select(AuditLog.action).where(AuditLog.target_user_id == member.user.id))
    ).all()
    assert actions == ["user.role_changed"]


async def test_a_password_reset_shows_a_temporary_password_once_and_ends_the_logins(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    admin = await login(client, await make_user(db, tenant, role="admin"))
    user = await make_user(db, tenant)
    session = await login(client, user)

    reset = await client.post(f"/admin/users/{user.id}/password", headers=admin.headers)
    assert reset.status_code == 200, reset.text
    assert reset.headers["cache-control"] == "no-store"
    temporary = reset.json()["temporary_password"]
    assert len(temporary) >= 12

    assert (await client.get("/me", headers=session.headers)).status_code == 401
    old = await client.post("/auth/token", json={"email": user.email, "password": DEFAULT_PASSWORD})
    assert old.status_code == 401
    new = await client.post("/auth/token", json={"email": user.email, "password": temporary})
    assert new.status_code == 200
    await scope_to_tenant(db, tenant.id)
    logged = await db.scalar(
        select(AuditLog.details).where(
            AuditLog.action == "user.password_reset", AuditLog.target_user_id == user.id
        )
    )
    assert logged is not None and temporary not in str(logged)
