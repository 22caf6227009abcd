"""The sign-in page offers "Sign in with …" for an organisation with single sign-on, and the
button signs a person in through a real OpenID provider (tests/sso/provider.py), in Chromium."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Page, expect

from tests.sso.provider import CLIENT_ID, CLIENT_SECRET, OpenIdProvider, install
from tests.web.conftest import World, api_login


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


async def test_sign_in_with_the_organisation_s_provider(
    page: Page, world: World, web_op: OpenIdProvider
) -> None:
    domain = world.admin_email.rsplit("@", 1)[1]
    async with httpx.AsyncClient(base_url=world.url) as client:
        headers = await api_login(client, world.admin_email)
        body = {
            "display_name": "Example ID",
            "issuer": web_op.issuer,
            "client_id": CLIENT_ID,
            "client_secret": CLIENT_SECRET,
            "allowed_domains": [domain],
        }
        assert (await client.put("/admin/sso", json=body, headers=headers)).status_code == 200
        try:
            await page.goto(f"{world.url}/?org={world.tenant}")
            button = page.get_by_role("link", name="Sign in with Example ID")
            await expect(button).to_be_visible()
            await page.fill("#email", f"newcomer@{domain}")
            await button.click()
            # Back from the provider, signed in: the app's shell with the newcomer's address.
            await expect(page.locator("header .who")).to_have_text(f"newcomer@{domain}")
        finally:
            assert (await client.delete("/admin/sso", headers=headers)).status_code == 204
