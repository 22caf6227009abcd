"""The admin's document page in a browser: its status history as a table (time, status,
detail; newest first) with a heading on every column, counts in the right number ("1 chunk",
not "1 chunks"), and no serious axe violation, light and dark."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import httpx
from playwright.async_api import Page, expect

from tests.web.conftest import World, api_login, screenshot, sign_in
from tests.web.test_a11y import audit


async def _ready_document(world: World) -> str:
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
        headers = await api_login(client, world.admin_email)
        added = await client.post(
            "/kb/documents",
            json={"title": "One-chunk note", "text": "Parcels to islands ship in five days."},
            headers=headers,
        )
        assert added.status_code == 202, added.text
        doc_id: str = added.json()["id"]
        for _ in range(300):
            doc = (await client.get(f"/kb/documents/{doc_id}", headers=headers)).json()
            if doc["status"] == "ready":
                return doc_id
            await asyncio.sleep(0.1)
    raise AssertionError(f"not ready: {doc}")


def test_no_count_is_worded_by_hand() -> None:
    """`countOf` (dom.js) is the one place the web app words a count: none of the forms
    that said "1 chunks" or "1 source(s)" is left."""
    js = Path(__file__).resolve().parents[2] / "app/web/static/js"
    sources = "\n".join(p.read_text() for p in js.rglob("*.js") if "vendor" not in p.parts)
    for wrong in ("} chunks`", "} documents`", "} files`", "source(s)", "} documents,"):
        assert wrong not in sources, wrong


async def test_the_document_page_shows_its_status_history(page: Page, world: World) -> None:
    doc_id = await _ready_document(world)
    await sign_in(page, world, world.admin_email)
    await expect(page.locator("#message")).to_be_visible()

    await page.goto(f"{world.url}/#/admin/kb")
    row = page.locator("tbody tr", has_text="One-chunk note")
    await expect(row).to_contain_text("1 chunk")
    await expect(row).not_to_contain_text("1 chunks")
    words = await page.evaluate(
        """async () => {
            const { countOf } = await import('/static/js/dom.js');
            return [countOf(0, 'chunk'), countOf(1, 'chunk'), countOf(2, 'document'),
                    countOf(1, 'file')];
        }"""
    )
    assert words == ["0 chunks", "1 chunk", "2 documents", "1 file"]

    await page.goto(f"{world.url}/#/admin/kb/{doc_id}")
    history = page.locator("section[aria-labelledby=doc-history]")
    await expect(history.locator("th")).to_have_text(["Time", "Status", "Detail"])
    rows = history.locator("tbody tr")
    await expect(rows).to_have_count(3)
    await expect(rows.nth(0)).to_contain_text("ready")
    await expect(rows.nth(0)).to_contain_text("1 chunk")
    await expect(rows.nth(1)).to_contain_text("attempt 1")
    await expect(rows.nth(2)).to_contain_text("added")
    assert await rows.nth(0).locator("time").get_attribute("datetime")
    # Every column heading says something (a column of buttons: to a screen reader).
    headings = await page.locator("th").all_inner_texts()
    empty = await page.evaluate(
        "() => [...document.querySelectorAll('th')].filter((th) => !th.textContent.trim()).length"
    )
    assert headings and empty == 0
    facts = page.locator("section[aria-labelledby=doc-facts]")
    await expect(facts).to_contain_text("PII replaced")
    await expect(facts).not_to_contain_text("[object Object]")
    for scheme in ("light", "dark"):
        await page.emulate_media(color_scheme=scheme)
        await page.wait_for_timeout(100)
        assert await audit(page) == [], scheme
        await history.scroll_into_view_if_needed()
        await screenshot(page, f"admin-kb-document-{scheme}")
    await page.emulate_media(color_scheme="light")


async def test_an_admin_moves_a_document_to_another_collection_on_its_page(
    page: Page, world: World
) -> None:
    archive = f"Archive {uuid.uuid4().hex[:6]}"
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
        headers = await api_login(client, world.admin_email)
        made = await client.post("/admin/collections", json={"name": archive}, headers=headers)
        assert made.status_code == 201, made.text
        added = await client.post(
            "/kb/documents",
            json={"title": "Moving note", "text": f"Boxes move on day {uuid.uuid4().hex}."},
            headers=headers,
        )
        doc_id = added.json()["id"]
    await sign_in(page, world, world.admin_email)
    await expect(page.locator("#message")).to_be_visible()
    await page.goto(f"{world.url}/#/admin/kb/{doc_id}")
    await expect(page.locator("#doc-collection")).to_have_text("General")
    await page.select_option("#doc-move", label=archive)
    await page.get_by_role("button", name="Move", exact=True).click()
    await expect(page.get_by_role("status")).to_contain_text(f"Moved to {archive}")
    await expect(page.locator("#doc-collection")).to_have_text(archive)
    await screenshot(page, "admin-document-moved")
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
        headers = await api_login(client, world.admin_email)
        doc = (await client.get(f"/kb/documents/{doc_id}", headers=headers)).json()
        assert doc["collection_id"] == made.json()["id"]
        # Out of the shared world again: later tests weigh what a member's first load reads.
        await client.delete(f"/kb/documents/{doc_id}", headers=headers)
        await client.delete(f"/admin/collections/{made.json()['id']}", headers=headers)
