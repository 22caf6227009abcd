"""The groups and collections pages in a browser, and a new chat's scope picker: an admin
makes a group with a member and a collection for it; the member ticks it in a new chat and
the conversation is restricted to it (ADR 0078)."""

from __future__ import annotations

import asyncio
import re
import uuid

import httpx
from playwright.async_api import Page, expect

from tests.factories import DEFAULT_PASSWORD
from tests.web.conftest import World, api_login, screenshot, sign_in


async def test_admin_shares_a_collection_with_a_group_and_its_member_scopes_a_chat(
    page: Page, world: World
) -> None:
    email = f"member-{uuid.uuid4().hex[:8]}@example.com"
    group = f"Group {uuid.uuid4().hex[:6]}"
    collection = f"Handbook {uuid.uuid4().hex[:6]}"
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
        admin = await api_login(client, world.admin_email)
        created = await client.post(
            "/admin/users", json={"email": email, "password": DEFAULT_PASSWORD}, headers=admin
        )
        assert created.status_code == 201, created.text
    await sign_in(page, world, world.admin_email)
    await expect(page.locator("#message")).to_be_visible()
    await page.goto(f"{world.url}/#/admin/groups")
    await expect(page.locator("h1")).to_have_text("Groups")
    await page.fill("#group-name", group)
    await page.click("form[aria-labelledby=group-new] button[type=submit]")
    row = page.locator("tbody tr", has_text=group)
    await row.locator("text=Members").click()
    await page.fill("#member-email", email)
    await page.locator("form", has=page.locator("#member-email")).locator("button").click()
    await expect(page.locator("section[aria-labelledby=group-members]")).to_contain_text(email)
    await screenshot(page, "admin-groups")

    await page.goto(f"{world.url}/#/admin/collections")
    await expect(page.locator("h1")).to_have_text("Collections")
    await page.fill("#collection-name", collection)
    await page.locator("fieldset label", has_text=group).first.locator("input").check()
    await page.click("form[aria-labelledby=collection-new] button[type=submit]")
    made = page.locator("tbody tr", has_text=collection)
    await expect(made).to_contain_text(group)
    await expect(page.locator("tbody tr", has_text="General")).to_contain_text("everyone")
    await screenshot(page, "admin-collections")

    await page.context.clear_cookies()
    await sign_in(page, world, email)
    await expect(page.locator("#message")).to_be_visible()
    picker = page.locator("fieldset.scope-picker")
    await expect(picker).to_be_visible()
    await picker.locator("label", has_text=collection).locator("input").check()
    await page.fill("#message", "What is the refund policy?")
    await page.keyboard.press("Enter")
    await expect(page).to_have_url(re.compile(r"#/c/"))
    session_id = page.url.split("#/c/")[1]
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
        member = await api_login(client, email)
        visible = (await client.get("/collections", headers=member)).json()["items"]
        wanted = next(c["id"] for c in visible if c["name"] == collection)
        for _ in range(60):  # the answer streams on: wait for its stored turn (30 s at most)
            turn = (await client.get(f"/sessions/{session_id}/turns", headers=member)).json()
            if turn["items"] and turn["items"][0]["status"] not in ("pending", "running"):
                break
            await asyncio.sleep(0.5)
        manifest = turn["items"][0]["context_metadata"]
        assert "access" in manifest, (turn["items"][0]["status"], len(turn["items"]))
        assert manifest["access"]["scope"] == [wanted]

    # A change in a stored conversation is saved at once, and shown when it is reopened.
    await picker.locator("label", has_text=collection).locator("input").uncheck()
    await picker.locator("label", has_text="General").locator("input").check()
    await expect(picker.locator("p")).to_have_text(re.compile(r"^Searching only: General"))
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
        member = await api_login(client, email)
        general = next(c["id"] for c in visible if c["name"] == "General")
        stored = (await client.get(f"/sessions/{session_id}", headers=member)).json()
        assert stored["collection_ids"] == [general]
    await page.goto(f"{world.url}/#/new")
    await page.goto(f"{world.url}/#/c/{session_id}")
    reopened = page.locator("fieldset.scope-picker")
    await expect(reopened.locator("label", has_text="General").locator("input")).to_be_checked()
    await expect(
        reopened.locator("label", has_text=collection).locator("input")
    ).not_to_be_checked()
    await screenshot(page, "chat-scope-reopened")
