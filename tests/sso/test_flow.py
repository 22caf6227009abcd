"""Single sign-on end to end against a real OpenID provider (oidc-provider, on loopback):
the sign-in, users created just in time, the groups claim at every sign-in, and each refusal.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from urllib.parse import urlencode, urlsplit

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.repository import UserRepository
from app.core.db import scope_to_tenant
from app.models import Tenant, User
from app.sso.flow import SSO_ONLY_CREDENTIAL
from tests.factories import LoggedIn, login, make_tenant, make_user
from tests.sso.browser import (
    SAME_ORIGIN,
    access_token,
    at_provider,
    callback,
    configure,
    query,
    refusal,
    sign_in,
    start,
)
from tests.sso.provider import (
    SHORT_CLIENT_ID,
    SHORT_CLIENT_SECRET,
    OpenIdProvider,
)


class RecordingGroupSync:
    """A group hook that remembers what it was handed."""

    def __init__(self) -> None:
        self.calls: list[tuple[uuid.UUID, uuid.UUID, list[str]]] = []

    async def set_user_groups(
        self, db: AsyncSession, tenant_id: uuid.UUID, user_id: uuid.UUID, names: Sequence[str]
    ) -> None:
        self.calls.append((tenant_id, user_id, list(names)))


async def _tenant_with_admin(
    client: httpx.AsyncClient, db: AsyncSession
) -> tuple[Tenant, LoggedIn]:
    tenant = await make_tenant(db)
    admin = await login(client, await make_user(db, tenant, role="admin"))
    return tenant, admin


async def _user(db: AsyncSession, tenant: Tenant, email: str) -> User | None:
    await scope_to_tenant(db, tenant.id)
    return await UserRepository(db, tenant.id).by_email(email)


async def test_a_new_user_signs_in_and_is_created_as_a_member(
    client: httpx.AsyncClient, db: AsyncSession, op: OpenIdProvider
) -> None:
    tenant, admin = await _tenant_with_admin(client, db)
    await configure(client, admin, op)
    options = (await client.get("/sso/options", params={"tenant": tenant.name})).json()
    assert options["sso"][0]["display_name"] == "Example ID"
    assert options["password_login"] is True
    assert await _user(db, tenant, "new.person@example.com") is None

    signed_in = await sign_in(client, tenant, "New.Person@example.com")

    assert signed_in.status_code == 303 and signed_in.headers["location"] == "/"
    cookie = signed_in.headers["set-cookie"]
    assert "tl_refresh=" in cookie and "path=/web/auth" in cookie.lower()
    token = await access_token(client)  # what the web app does on load
    me = await client.get("/me", headers={"Authorization": f"Bearer {token}"})
    assert me.status_code == 200
    assert me.json()["email"] == "new.person@example.com"
    assert me.json()["role"] == "member"
    assert me.json()["tenant_id"] == str(tenant.id)
    user = await _user(db, tenant, "new.person@example.com")
    assert user is not None and user.password_hash == SSO_ONLY_CREDENTIAL
    assert user.last_login_at is not None
    # The session is a password login's: the browser's logout signs it out.
    out = await client.post("/web/auth/logout", headers=SAME_ORIGIN)
    assert out.status_code == 204
    gone = await client.get("/me", headers={"Authorization": f"Bearer {token}"})
    assert gone.status_code == 401


async def test_an_existing_user_keeps_their_account_and_role(
    client: httpx.AsyncClient, db: AsyncSession, op: OpenIdProvider
) -> None:
    tenant, admin = await _tenant_with_admin(client, db)
    await configure(client, admin, op)
    signed_in = await sign_in(client, tenant, admin.user.email)
    assert signed_in.headers["location"] == "/"
    me = await client.get("/me", headers={"Authorization": f"Bearer {await access_token(client)}"})
    assert me.json()["id"] == str(admin.user.id) and me.json()["role"] == "admin"


async def test_the_groups_claim_reaches_the_hook_at_every_sign_in(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, op: OpenIdProvider
) -> None:
    hook = RecordingGroupSync()
    app.state.sso_group_sync = hook
    try:
        tenant, admin = await _tenant_with_admin(client, db)
        await configure(client, admin, op)
        email = f"g-{uuid.uuid4().hex[:6]}@example.com"
        op.set_accounts({email: {"groups": ["Engineering", "HR", "Engineering"]}})
        assert (await sign_in(client, tenant, email)).headers["location"] == "/"
        op.set_accounts({email: {"groups": ["Engineering"]}})
        assert (await sign_in(client, tenant, email)).headers["location"] == "/"
    finally:
        app.state.sso_group_sync = None

    user = await _user(db, tenant, email)
    assert user is not None
    assert hook.calls == [
        (tenant.id, user.id, ["Engineering", "HR"]),
        (tenant.id, user.id, ["Engineering"]),
    ]


async def test_the_groups_claim_sets_the_memberships_of_existing_groups(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, op: OpenIdProvider
) -> None:
    """By default the provider's group names become memberships of the tenant's groups of
    those names; a name no group has is ignored, and a group the claim stops naming is left."""
    app.state.sso_group_sync = None
    tenant, admin = await _tenant_with_admin(client, db)
    await configure(client, admin, op)
    made = {}
    for name in ("Engineering", "HR"):
        created = await client.post("/admin/groups", json={"name": name}, headers=admin.headers)
        assert created.status_code == 201, created.text
        made[name] = created.json()["id"]
    email = f"m-{uuid.uuid4().hex[:6]}@example.com"

    async def members(name: str) -> set[str]:
        group = await client.get(f"/admin/groups/{made[name]}", headers=admin.headers)
        assert group.status_code == 200, group.text
        return {m["email"] for m in group.json()["member_list"]}

    op.set_accounts({email: {"groups": ["Engineering", "HR", "Board"]}})
    assert (await sign_in(client, tenant, email)).headers["location"] == "/"
    assert email in await members("Engineering") and email in await members("HR")
    op.set_accounts({email: {"groups": ["Engineering"]}})
    assert (await sign_in(client, tenant, email)).headers["location"] == "/"
    assert email in await members("Engineering")
    assert email not in await members("HR")
    listed = await client.get("/admin/groups", headers=admin.headers)
    assert "Board" not in {g["name"] for g in listed.json()["items"]}


async def test_a_replayed_callback_is_refused(
    client: httpx.AsyncClient, db: AsyncSession, op: OpenIdProvider
) -> None:
    tenant, admin = await _tenant_with_admin(client, db)
    await configure(client, admin, op)
    email = "replay@example.com"
    authorization = await start(client, tenant, email)
    back = await at_provider(authorization)
    first = await callback(client, back)
    assert first.headers["location"] == "/"
    # The same state and code again (e.g. from the browser's history): the state is spent.
    await client.get(urlsplit(authorization).path)  # no-op: the binding cookie stays as it was
    again = await callback(client, back)
    assert refusal(again) == "bad_state"
    assert "tl_refresh" not in again.headers.get("set-cookie", "")


async def test_a_code_already_redeemed_is_refused_in_a_new_sign_in(
    client: httpx.AsyncClient, db: AsyncSession, op: OpenIdProvider
) -> None:
    tenant, admin = await _tenant_with_admin(client, db)
    await configure(client, admin, op)
    email = "code-replay@example.com"
    used = query(await at_provider(await start(client, tenant, email)))
    assert (await callback(client, "/sso/callback?" + urlencode(used))).headers["location"] == "/"
    # A new sign-in of this browser, answered with the code the first one redeemed.
    fresh = query(await at_provider(await start(client, tenant, email)))
    replayed = await callback(client, "/sso/callback?" + urlencode({**fresh, "code": used["code"]}))
    assert refusal(replayed) == "code_refused"


async def test_an_id_token_for_another_sign_in_is_refused_by_its_nonce(
    client: httpx.AsyncClient, db: AsyncSession, op: OpenIdProvider
) -> None:
    """The provider issues an ID token whose nonce is not the one this sign-in stored (the
    authorization request was altered on its way, as an ID token replayed from another
    sign-in would carry that sign-in's nonce)."""
    tenant, admin = await _tenant_with_admin(client, db)
    await configure(client, admin, op)
    email = "nonce@example.com"
    authorization = await start(client, tenant, email)
    altered = authorization.replace(f"nonce={query(authorization)['nonce']}", "nonce=stolen")
    refused = await callback(client, await at_provider(altered))
    assert refusal(refused) == "id_token_replayed"
    assert await _user(db, tenant, email) is None


async def test_a_bad_state_is_refused(
    client: httpx.AsyncClient, db: AsyncSession, op: OpenIdProvider
) -> None:
    tenant, admin = await _tenant_with_admin(client, db)
    await configure(client, admin, op)
    email = "state@example.com"
    back = query(await at_provider(await start(client, tenant, email)))
    for state in (f"{tenant.id}.forged", "not-a-tenant.x", ""):
        forged = await callback(client, "/sso/callback?" + urlencode({**back, "state": state}))
        assert refusal(forged) == "bad_state", state
    # Another browser (no binding cookie) arriving with the genuine state: refused too.
    async with httpx.AsyncClient(
        transport=client._transport, base_url="http://threadline.test"
    ) as stranger:
        other = await callback(stranger, "/sso/callback?" + urlencode(back))
    assert refusal(other) == "bad_state"
    assert await _user(db, tenant, email) is None


async def test_an_answer_from_an_unknown_issuer_is_refused(
    client: httpx.AsyncClient, db: AsyncSession, op: OpenIdProvider, other_op: OpenIdProvider
) -> None:
    """A mix-up: the sign-in goes to (or its answer comes from) a provider the tenant did not
    configure, with the same client registration."""
    tenant, admin = await _tenant_with_admin(client, db)
    await configure(client, admin, op)
    email = "mixup@example.com"
    authorization = await start(client, tenant, email)
    elsewhere = other_op.issuer + "/auth?" + urlsplit(authorization).query
    answer = await at_provider(elsewhere)
    assert query(answer)["iss"] == other_op.issuer
    assert refusal(await callback(client, answer)) == "wrong_issuer"
    assert await _user(db, tenant, email) is None


async def test_an_expired_id_token_is_refused(
    client: httpx.AsyncClient, db: AsyncSession, lagging_op: OpenIdProvider
) -> None:
    """The provider's clock is five minutes behind and this client's ID tokens live one
    second: the token is expired when it arrives, past the default one-minute leeway."""
    tenant, admin = await _tenant_with_admin(client, db)
    await configure(
        client, admin, lagging_op, client_id=SHORT_CLIENT_ID, client_secret=SHORT_CLIENT_SECRET
    )
    email = "late@example.com"
    assert refusal(await sign_in(client, tenant, email)) == "id_token_expired"
    assert await _user(db, tenant, email) is None


async def test_an_e_mail_outside_the_allowed_domains_is_refused(
    client: httpx.AsyncClient, db: AsyncSession, op: OpenIdProvider
) -> None:
    tenant, admin = await _tenant_with_admin(client, db)
    await configure(client, admin, op)
    assert refusal(await sign_in(client, tenant, "someone@elsewhere.org")) == (
        "email_domain_refused"
    )
    assert await _user(db, tenant, "someone@elsewhere.org") is None


async def test_a_disabled_account_cannot_sign_in(
    client: httpx.AsyncClient, db: AsyncSession, op: OpenIdProvider
) -> None:
    tenant, admin = await _tenant_with_admin(client, db)
    await configure(client, admin, op)
    member = await make_user(db, tenant, email="gone@example.com")
    disabled = await client.patch(
        f"/admin/users/{member.id}", json={"disabled": True}, headers=admin.headers
    )
    assert disabled.status_code == 200, disabled.text
    assert refusal(await sign_in(client, tenant, "gone@example.com")) == "account_disabled"


@pytest.mark.parametrize("password_login", [True, False])
async def test_password_login_can_be_turned_off(
    client: httpx.AsyncClient, db: AsyncSession, op: OpenIdProvider, password_login: bool
) -> None:
    tenant, admin = await _tenant_with_admin(client, db)
    member = await make_user(db, tenant)
    await configure(client, admin, op, password_login=password_login)
    credentials = {"email": member.email, "password": "correct horse battery"}
    api = await client.post("/auth/token", json=credentials)
    browser = await client.post("/web/auth/login", json=credentials, headers=SAME_ORIGIN)
    options = (await client.get("/sso/options", params={"tenant": tenant.name})).json()
    assert options["password_login"] is password_login
    if password_login:
        assert api.status_code == 200 and browser.status_code == 200
        return
    for refused in (api, browser):
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["code"] == "password_login_disabled"
        assert "single sign-on" in refused.json()["error"]["message"]
    # A wrong password learns nothing more than before.
    wrong = await client.post("/auth/token", json={**credentials, "password": "wrong-password"})
    assert wrong.status_code == 401
    # Signing in through the provider still works.
    assert (await sign_in(client, tenant, member.email)).headers["location"] == "/"


async def test_a_disabled_provider_neither_signs_in_nor_keeps_passwords_off(
    client: httpx.AsyncClient, db: AsyncSession, op: OpenIdProvider
) -> None:
    tenant, admin = await _tenant_with_admin(client, db)
    member = await make_user(db, tenant)
    await configure(client, admin, op, enabled=False, password_login=False)
    credentials = {"email": member.email, "password": "correct horse battery"}
    assert (await client.post("/auth/token", json=credentials)).status_code == 200
    options = (await client.get("/sso/options", params={"tenant": tenant.name})).json()
    assert options == {"password_login": True, "sso": []}
    assert (await client.get(f"/sso/{tenant.id}/login")).status_code == 404
