"""The admin pages in a browser: the knowledge base, users and keys, FAQs, policies, and the
audit, whose reads land in the append-only log."""

from __future__ import annotations

import uuid

import httpx
from playwright.async_api import Page, expect

from tests.factories import DEFAULT_PASSWORD
from tests.web.conftest import World, api_login, screenshot, sign_in


async def _admin(page: Page, world: World, path: str) -> None:
    await sign_in(page, world, world.admin_email)
    await expect(page.locator("#message")).to_be_visible()
    await page.goto(f"{world.url}/#/admin/{path}")


async def test_admin_opens_a_turn_in_the_audit_and_the_log_shows_that_read(
    page: Page, world: World
) -> None:
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
        headers = await api_login(client, world.admin_email)
        chat = (await client.post("/sessions", json={}, headers=headers)).json()
        asked = await client.post(
            "/chat",
            json={"session_id": chat["id"], "message": "What is the refund policy?"},
            headers=headers,
        )
        assert asked.status_code == 200, asked.text
        turn_id = asked.json()["turn_id"]
    await _admin(page, world, "audit")
    await expect(page.locator("h1")).to_have_text("Audit")
    await page.fill("#f-session_id", chat["id"])
    await page.select_option("#f-composition", "pure_kb")
    await page.click("form.filters button[type=submit]")
    rows = page.locator("tbody tr")
    await expect(rows).to_have_count(1)
    await screenshot(page, "admin-audit")
    await rows.first.locator("text=Open").click()
    await expect(page.locator("h1")).to_have_text("Audit: one turn")
    await expect(page.locator("main")).to_contain_text(turn_id)
    await expect(page.locator("main")).to_contain_text("Context manifest")
    await expect(page.locator("pre.json")).to_contain_text("token_budget")
    await screenshot(page, "admin-audit-turn")
    await page.goto(f"{world.url}/#/admin/log")
    await page.fill("#l-action", "audit.turn.read")
    await page.click("form.filters button[type=submit]")
    await expect(page.locator("tbody tr").first).to_contain_text("audit.turn.read")
    await expect(page.locator("tbody tr").first).to_contain_text(f"turns/{turn_id}")
    await screenshot(page, "admin-log")


async def test_admin_adds_a_kb_document_watches_it_become_ready_and_searches(
    page: Page, world: World
) -> None:
    await _admin(page, world, "kb")
    await expect(page.locator("h1")).to_have_text("Knowledge base")
    await page.fill("#kb-title", "Shipping times")
    await page.fill("#kb-text", "Parcels ship within two working days to every country.")
    await page.click("form[aria-labelledby=kb-text-title] button[type=submit]")
    row = page.locator("tbody tr", has_text="Shipping times")
    await expect(row).to_contain_text("1 chunk", timeout=30_000)  # one sentence: one chunk
    await expect(row).not_to_contain_text("1 chunks")
    await page.fill("#kb-query", "parcels ship")
    await page.click("form[role=search] button[type=submit]")
    hit = page.locator("form[role=search] tbody tr").first
    await expect(hit).to_contain_text("Shipping times")
    await screenshot(page, "admin-kb")


async def test_the_other_admin_pages_render(page: Page, world: World) -> None:
    await _admin(page, world, "users")
    await expect(page.locator("h1")).to_have_text("Users & API keys")
    await page.fill("#key-name", "ci")
    await page.click("text=Create key")
    await expect(page.locator("main")).to_contain_text("not shown again")
    await screenshot(page, "admin-users")
    await page.goto(f"{world.url}/#/admin/faqs")
    await page.fill("#faq-question", "How long do refunds take?")
    await page.fill("#faq-answer", "Refunds are paid within **14 days**.")
    await page.click("form button[type=submit]")
    await expect(page.locator("tbody")).to_contain_text("How long do refunds take?")
    await screenshot(page, "admin-faqs")
    await page.goto(f"{world.url}/#/admin/guardrails")
    await expect(page.locator("h1")).to_have_text("Guardrail policy")
    await expect(page.locator("pre.json")).to_contain_text("injection")
    await screenshot(page, "admin-guardrails")
    await page.goto(f"{world.url}/#/admin/retention")
    await page.fill("#r-days", "365")
    await page.click("form button[type=submit]")
    await expect(page.locator("[role=status]")).to_contain_text("365 days")
    await screenshot(page, "admin-retention")


async def test_admin_user_lifecycle_through_the_pages(page: Page, world: World) -> None:
    """Create → disable (their token gets 401) → enable → reset → erase with a typed
    confirmation, all from the Users page; every destructive step asks first."""
    email = f"lifecycle-{uuid.uuid4().hex[:8]}@example.com"
    await _admin(page, world, "users")
    await expect(page.locator("#users-title")).to_be_visible()
    await page.fill("#user-email", email)
    await page.fill("#user-password", DEFAULT_PASSWORD)
    await page.click("text=Add user")
    await page.fill("#user-search", email[:18])
    row = page.locator("tbody tr", has_text=email)
    await expect(row).to_contain_text("active")
    await expect(row).to_contain_text("never")
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
        headers = await api_login(client, email)
        assert (await client.get("/me", headers=headers)).status_code == 200

        await row.locator("button:has-text('Disable')").click()
        dialog = page.locator("dialog.confirm")
        await expect(dialog).to_be_visible()
        await screenshot(page, "admin-users-confirm")
        await dialog.locator("button:has-text('Cancel')").click()
        await expect(row).to_contain_text("active")  # cancelled: nothing happened
        await row.locator("button:has-text('Disable')").click()
        await dialog.locator("button:has-text('Disable')").click()
        await expect(row).to_contain_text("disabled")
        me = await client.get("/me", headers=headers)
        assert me.status_code == 401 and me.json()["error"]["code"] == "account_disabled"

        await row.locator("button:has-text('Enable')").click()
        await expect(row).to_contain_text("active")
        await row.locator("select").select_option("admin")
        await expect(page.locator("[role=status]").first).to_contain_text("is now admin")

        await row.locator("button:has-text('Reset password')").click()
        await dialog.locator("button:has-text('Reset password')").click()
        temporary = page.locator("code[aria-label='Temporary password']")
        await expect(temporary).to_be_visible()
        await screenshot(page, "admin-users")
        login = await client.post(
            "/auth/token", json={"email": email, "password": await temporary.inner_text()}
        )
        assert login.status_code == 200

        await row.locator("button:has-text('Erase')").click()
        confirm = dialog.locator("button:has-text('Erase user')")
        await expect(confirm).to_be_disabled()
        await dialog.locator("#confirm-typed").fill("someone-else@example.com")
        await expect(confirm).to_be_disabled()
        await dialog.locator("#confirm-typed").fill(email)
        await confirm.click()
        await expect(page.locator("[role=status]").first).to_contain_text(f"Erased {email}")
        await expect(row).to_have_count(0)
        gone = await client.post("/auth/token", json={"email": email, "password": DEFAULT_PASSWORD})
        assert gone.status_code == 401


async def test_deleting_a_kb_document_asks_first(page: Page, world: World) -> None:
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
        headers = await api_login(client, world.admin_email)
        title = f"Disposable {uuid.uuid4().hex[:6]}"
        created = await client.post(
            "/kb/documents", json={"title": title, "text": "Short lived."}, headers=headers
        )
        assert created.status_code in (200, 202)
    await _admin(page, world, "kb")
    row = page.locator("tbody tr", has_text=title)
    await row.locator("button:has-text('Delete')").click()
    dialog = page.locator("dialog.confirm")
    await expect(dialog).to_contain_text(title)
    await page.keyboard.press("Escape")
    await expect(dialog).to_have_count(0)
    await expect(row).to_have_count(1)
    await row.locator("button:has-text('Delete')").click()
    await dialog.locator("button:has-text('Delete document')").click()
    await expect(row).to_have_count(0)
