"""Tenant admins manage their OpenID provider: the secret is write-only, every change is in
the audit log (before and after, the secret redacted), and no one else sees or changes it."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.db import scope_to_tenant
from app.sso.repository import SsoProviderRepository
from tests.factories import login, make_tenant, make_user

SECRET = "very-secret-client-secret"
SETTINGS: dict[str, Any] = {
    "display_name": "Acme Okta",
    "issuer": "https://acme.okta.example",
    "client_id": "threadline-client",
    "client_secret": SECRET,
    "allowed_domains": ["Acme.example", "@sub.acme.example"],
    "groups_claim": "groups",
}


async def test_an_admin_sets_reads_changes_and_removes_the_provider(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    admin = await login(client, await make_user(db, tenant, role="admin"))
    assert (await client.get("/admin/sso", headers=admin.headers)).status_code == 404

    created = await client.put("/admin/sso", json=SETTINGS, headers=admin.headers)
    assert created.status_code == 200, created.text
    body = created.json()
    assert body["allowed_domains"] == ["acme.example", "sub.acme.example"]
    assert body["client_secret_set"] is True
    assert body["redirect_uri"] == "http://threadline.test/sso/callback"
    assert body["password_login"] is True and body["enabled"] is True
    assert SECRET not in created.text and 'client_secret"' not in created.text
    read = await client.get("/admin/sso", headers=admin.headers)
    assert read.json() == body and SECRET not in read.text
    # Stored encrypted, not as given.
    await scope_to_tenant(db, tenant.id)
    stored = await SsoProviderRepository(db, tenant.id).get()
    assert stored is not None and SECRET not in stored.client_secret_encrypted

    # A change without the secret keeps the stored one.
    change = {k: v for k, v in SETTINGS.items() if k != "client_secret"}
    changed = await client.put(
        "/admin/sso", json={**change, "password_login": False}, headers=admin.headers
    )
    assert changed.status_code == 200 and changed.json()["client_secret_set"] is True
    assert (await client.delete("/admin/sso", headers=admin.headers)).status_code == 204
    assert (await client.get("/admin/sso", headers=admin.headers)).status_code == 404

    log = await client.get(
        "/admin/audit/log", params={"action": "sso.settings.set"}, headers=admin.headers
    )
    entries = log.json()["items"]
    assert [e["details"]["client_secret_changed"] for e in entries] == [False, True]
    latest, first = entries
    assert first["actor_user_id"] == str(admin.user.id)
    assert first["details"]["before"] is None
    assert first["details"]["after"]["issuer"] == SETTINGS["issuer"]
    assert latest["details"]["before"]["password_login"] is True
    assert latest["details"]["after"]["password_login"] is False
    assert latest["details"]["after"]["client_secret"] == "[redacted]"
    deleted = await client.get(
        "/admin/audit/log", params={"action": "sso.settings.delete"}, headers=admin.headers
    )
    (removal,) = deleted.json()["items"]
    assert removal["details"]["before"]["display_name"] == "Acme Okta"
    assert removal["details"]["after"] is None
    assert SECRET not in log.text + deleted.text


async def test_bad_settings_are_refused_and_change_nothing(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    admin = await login(client, await make_user(db, tenant, role="admin"))
    bad: list[dict[str, Any]] = [
        {**SETTINGS, "issuer": "http://idp.example"},
        {**SETTINGS, "issuer": "https://idp.example/?q=1"},
        {**SETTINGS, "issuer": "https://idp.example/#x"},
        {**SETTINGS, "allowed_domains": []},
        {**SETTINGS, "allowed_domains": ["not a domain"]},
        {**SETTINGS, "scopes": "email profile"},
        {**SETTINGS, "scopes": "openidx email"},
    ]
    for body in bad:
        response = await client.put("/admin/sso", json=body, headers=admin.headers)
        assert response.status_code == 422, (body, response.text)
        assert response.json()["error"]["code"] == "validation_error", response.text
    secretless = {k: v for k, v in SETTINGS.items() if k != "client_secret"}
    response = await client.put("/admin/sso", json=secretless, headers=admin.headers)
    assert response.status_code == 409, response.text
    assert response.json()["error"]["code"] == "sso_client_secret_required"
    assert (await client.get("/admin/sso", headers=admin.headers)).status_code == 404


async def test_members_and_other_tenants_neither_see_nor_change_it(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    admin = await login(client, await make_user(db, tenant, role="admin"))
    member = await login(client, await make_user(db, tenant))
    assert (await client.put("/admin/sso", json=SETTINGS, headers=admin.headers)).is_success
    for method in ("GET", "PUT", "DELETE"):
        kwargs: dict[str, Any] = {"json": SETTINGS} if method == "PUT" else {}
        refused = await client.request(method, "/admin/sso", headers=member.headers, **kwargs)
        assert refused.status_code == 403, (method, refused.text)
    other = await make_tenant(db)
    stranger = await login(client, await make_user(db, other, role="admin"))
    assert (await client.get("/admin/sso", headers=stranger.headers)).status_code == 404
    assert (await client.delete("/admin/sso", headers=stranger.headers)).status_code == 404
    assert (await client.get("/admin/sso", headers=admin.headers)).status_code == 200
    # The sign-in page learns only what the button needs.
    options = await client.get("/sso/options", params={"tenant": tenant.name})
    assert options.json()["sso"][0]["display_name"] == "Acme Okta"
    assert "acme.okta" not in options.text and "threadline-client" not in options.text
    unknown = await client.get("/sso/options", params={"tenant": "no-such-tenant"})
    assert unknown.json() == {"password_login": True, "sso": []}
    assert (await client.get(f"/sso/{other.id}/login")).status_code == 404
