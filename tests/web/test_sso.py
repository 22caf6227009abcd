"""Single sign-on in the browser: an admin sets the provider on the SSO page, the sign-in
page offers "Sign in with …" for the organisation, and the button signs a newcomer in
through a real OpenID provider (tests/sso/provider.py), in Chromium."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Page, expect

from tests.sso.provider import CLIENT_ID, CLIENT_SECRET, OpenIdProvider, install
from tests.web.conftest import World, api_login, sign_in, submit_login


@pytest.fixture
def web_op(world: World, tmp_path: Path) -> Iterator[OpenIdProvider]:
    provider = OpenIdProvider(
        install(), tmp_path / "accounts.json", redirect_uri=world.url + "/sso/callback"
    )
    provider.start()
    try:
        yield provider
    finally:
        provider.stop()


async def test_an_admin_sets_sso_and_a_newcomer_signs_in_with_it(
    page: Page, world: World, web_op: OpenIdProvider
) -> None:
    domain = world.admin_email.rsplit("@", 1)[1]
    await sign_in(page, world, world.admin_email)
    await page.goto(f"{world.url}/#/admin/sso")
    await expect(page.get_by_role("heading", name="Single sign-on")).to_be_visible()
    await expect(page.locator("form code")).to_have_text(world.url + "/sso/callback")
    await page.fill("#s-name", "Example ID")
    await page.fill("#s-issuer", web_op.issuer)
    await page.fill("#s-client", CLIENT_ID)
    await page.fill("#s-secret", CLIENT_SECRET)
    await page.fill("#s-domains", domain)
    await page.click("form button[type=submit]")
    await expect(page.get_by_role("status")).to_have_text("Saved.")
    await page.get_by_role("button", name="Log out").click()
    try:
        await page.goto(f"{world.url}/?org={world.tenant}")
        button = page.get_by_role("link", name="Sign in with Example ID")
        await expect(button).to_be_visible()
        await page.fill("#email", f"newcomer@{domain}")
        await button.click()
        # Back from the provider, signed in: the app's shell with the newcomer's address.
        await expect(page.locator("header .who")).to_have_text(f"newcomer@{domain}")
    finally:
        async with httpx.AsyncClient(base_url=world.url) as client:
            headers = await api_login(client, world.admin_email)
            assert (await client.delete("/admin/sso", headers=headers)).status_code == 204


async def test_turning_passwords_off_asks_first_and_sso_can_be_removed_on_the_page(
    page: Page, world: World
) -> None:
    """Unticking "Password login allowed" locks out whoever has not signed in with single
    sign-on, admins included: the page asks before saving it, and removing single sign-on
    is a button of its own."""
    domain = world.admin_email.rsplit("@", 1)[1]
    await sign_in(page, world, world.admin_email)
    await page.goto(f"{world.url}/#/admin/sso")
    await page.fill("#s-name", "Nowhere ID")
    await page.fill("#s-issuer", "http://127.0.0.1:9/")
    await page.fill("#s-client", CLIENT_ID)
    await page.fill("#s-secret", CLIENT_SECRET)
    await page.fill("#s-domains", domain)
    await page.uncheck("#s-passwords")
    await page.click("form button[type=submit]")
    dialog = page.get_by_role("dialog", name="Turn off password sign-in?")
    await expect(dialog).to_be_visible()
    await dialog.get_by_role("button", name="Cancel").click()
    async with httpx.AsyncClient(base_url=world.url) as client:
        headers = await api_login(client, world.admin_email)
        assert (await client.get("/admin/sso", headers=headers)).status_code == 404

    await page.check("#s-passwords")
    await page.click("form button[type=submit]")
    await expect(page.get_by_role("status")).to_have_text("Saved.")
    await page.get_by_role("button", name="Remove single sign-on").click()
    confirm = page.get_by_role("dialog", name="Remove single sign-on?")
    await confirm.get_by_role("button", name="Remove single sign-on").click()
    await expect(page.get_by_role("status")).to_have_text(
        "Single sign-on removed. Everyone signs in with a password."
    )
    async with httpx.AsyncClient(base_url=world.url) as client:
        headers = await api_login(client, world.admin_email)
        assert (await client.get("/admin/sso", headers=headers)).status_code == 404


async def test_a_password_refused_for_sso_leads_to_the_organisations_button(
    page: Page, world: World
) -> None:
    """Signed in with a password where the organisation allows only single sign-on, and no
    organisation typed: the page opens the organisation field and says what to do, and the
    button appears once it is typed."""
    domain = world.admin_email.rsplit("@", 1)[1]
    async with httpx.AsyncClient(base_url=world.url) as client:
        headers = await api_login(client, world.admin_email)
        body = {
            "display_name": "Nowhere ID",
            "issuer": "http://127.0.0.1:9/",
            "client_id": CLIENT_ID,
            "client_secret": CLIENT_SECRET,
            "allowed_domains": [domain],
            "password_login": False,
        }
        assert (await client.put("/admin/sso", json=body, headers=headers)).status_code == 200
    try:
        await submit_login(page, world, world.admin_email)
        await expect(page.get_by_role("alert")).to_contain_text("type its name under Organisation")
        await expect(page.locator("#tenant")).to_be_focused()
        await page.fill("#tenant", world.tenant)
        await page.locator("#tenant").blur()
        await expect(page.get_by_role("link", name="Sign in with Nowhere ID")).to_be_visible()
    finally:
        # The access token taken before passwords were turned off is still good for this.
        async with httpx.AsyncClient(base_url=world.url) as client:
            assert (await client.delete("/admin/sso", headers=headers)).status_code == 204
