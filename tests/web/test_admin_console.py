"""The admin console's lists and controls (issue 28, item 2): the role select on the Users
page shows its whole value at 1440 and 390 px; many files upload at once, by picker or
drop, each with its own progress and outcome, into the collection picked (ADR 0087); a
document's view shows its chunks (paged) and its status history, and deletes it after
asking; API keys are paged."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Page, expect

from tests.web.conftest import NARROW, WIDE, World, api_login, screenshot, sign_in
from tests.web.test_a11y import audit

# The select's own text needs this much room: the widest option's text in the select's font,
# its padding, and the arrow (measured in the page, so fonts and zoom are the browser's).
_CLIPPED = """(select) => {
  const style = getComputedStyle(select);
  const probe = document.createElement("span");
  probe.style.font = style.font;
  probe.style.position = "absolute";
  probe.style.whiteSpace = "pre";
  document.body.append(probe);
  let widest = 0;
  for (const option of select.options) {
    probe.textContent = option.text;
    widest = Math.max(widest, probe.getBoundingClientRect().width);
  }
  probe.remove();
  const room = select.clientWidth - parseFloat(style.paddingLeft) - 16;
  return { widest, room };
}"""


async def test_the_role_select_on_the_users_page_is_not_clipped(page: Page, world: World) -> None:
    await sign_in(page, world, world.admin_email)
    await expect(page.locator("#message")).to_be_visible()
    await page.goto(f"{world.url}/#/admin/users")
    select = page.locator("td select").first
    await expect(select).to_be_visible()
    for size in (WIDE, NARROW):
        await page.set_viewport_size(size)
        await page.wait_for_timeout(100)
        measured = await select.evaluate(_CLIPPED)
        assert measured["room"] >= measured["widest"], (size, measured)
    await page.set_viewport_size(WIDE)
    await screenshot(page, "admin-users-roles")


async def _remove_documents(world: World, filenames: set[str]) -> None:
    """Take this test's documents out of the shared knowledge base again: later tests read
    what it covers (the new chat's overview) and what it answers."""
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
        headers = await api_login(client, world.admin_email)
        listed = await client.get("/kb/documents", params={"limit": 100}, headers=headers)
        for document in listed.json()["items"]:
            if document["filename"] in filenames:
                await client.delete(f"/kb/documents/{document['id']}", headers=headers)


@pytest.fixture
async def uploaded(world: World) -> AsyncIterator[set[str]]:
    """The file names a test uploads; their documents are deleted after it."""
    names: set[str] = set()
    yield names
    await _remove_documents(world, names)


async def test_many_files_upload_at_once_each_with_its_progress_and_outcome(
    page: Page, world: World, tmp_path: Path, uploaded: set[str]
) -> None:
    files = {
        "returns.md": b"# Returns\n\nGoods come back within 30 days of delivery.",
        "shipping.txt": b"Shipping takes three to five working days.",
        "picture.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01",
    }
    uploaded.update({*files, "dropped.md"})
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    await sign_in(page, world, world.admin_email)
    await expect(page.locator("#message")).to_be_visible()
    await page.goto(f"{world.url}/#/admin/kb")
    await expect(page.locator("h1")).to_have_text("Knowledge base")
    await page.set_input_files("#kb-files", [str(tmp_path / name) for name in files])
    uploads = page.locator(".uploads li")
    await expect(uploads).to_have_count(3)
    for name, state in (
        ("returns.md", "ready"),
        ("shipping.txt", "ready"),
        ("picture.png", "failed"),
    ):
        row = uploads.filter(has_text=name)
        await expect(row).to_have_attribute("data-state", state, timeout=30_000)
        await expect(row.locator("progress")).to_have_attribute("aria-label", f"Progress of {name}")
    await expect(uploads.filter(has_text="returns.md")).to_contain_text("Ready — 1 chunk")
    await expect(uploads.filter(has_text="picture.png")).to_contain_text("file type is refused")
    await screenshot(page, "admin-kb-uploads")
    assert await audit(page) == []

    # Dropped files go the same way.
    await page.evaluate(
        """() => {
            const data = new DataTransfer();
            data.items.add(new File(["# Dropped\\n\\nDropped files are welcome."], "dropped.md",
                                    { type: "text/markdown" }));
            document.querySelector(".drop-zone").dispatchEvent(
                new DragEvent("drop", { dataTransfer: data, bubbles: true, cancelable: true }));
        }"""
    )
    dropped = uploads.filter(has_text="dropped.md")
    await expect(dropped).to_have_attribute("data-state", "ready", timeout=30_000)
    await expect(page.locator("tbody a", has_text="Dropped")).to_be_visible()


async def test_files_go_into_the_collection_picked_and_the_list_names_it(
    page: Page, world: World, tmp_path: Path, uploaded: set[str]
) -> None:
    collection = f"Board room {uuid.uuid4().hex[:6]}"
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
        headers = await api_login(client, world.admin_email)
        created = await client.post(
            "/admin/collections", json={"name": collection, "visibility": "groups"}, headers=headers
        )
        assert created.status_code == 201, created.text
    collection_id = created.json()["id"]
    name = f"minutes-{uuid.uuid4().hex[:6]}.md"
    uploaded.add(name)
    (tmp_path / name).write_bytes(b"# Minutes\n\nThe board met on a rainy Tuesday.")
    try:
        await sign_in(page, world, world.admin_email)
        await expect(page.locator("#message")).to_be_visible()
        await page.goto(f"{world.url}/#/admin/kb")
        picker = page.locator("#kb-collection")
        await expect(picker).to_have_value(await _default_collection(world))
        await expect(picker.locator("option:checked")).to_have_text("General")
        await picker.select_option(label=collection)
        await page.set_input_files("#kb-files", [str(tmp_path / name)])
        row = page.locator(".uploads li", has_text=name)
        await expect(row).to_have_attribute("data-state", "ready", timeout=30_000)
        listed = page.locator("tbody tr", has_text=name)
        await expect(listed).to_contain_text(collection)
        await screenshot(page, "admin-kb-collection-picker")
        assert await audit(page) == []
        await listed.locator("a").click()  # the document's own view names it too
        await expect(page.locator("h1")).to_have_text(name)
        await expect(page.locator("main")).to_contain_text(collection)
        async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
            headers = await api_login(client, world.admin_email)
            documents = await client.get("/kb/documents", params={"limit": 100}, headers=headers)
        (document,) = [d for d in documents.json()["items"] if d["filename"] == name]
        assert document["collection_id"] == collection_id
    finally:
        await _remove_documents(world, {name})
        async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
            headers = await api_login(client, world.admin_email)
            await client.delete(f"/admin/collections/{collection_id}", headers=headers)


async def _default_collection(world: World) -> str:
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
        headers = await api_login(client, world.admin_email)
        listed = await client.get("/admin/collections", headers=headers)
    (default,) = [c["id"] for c in listed.json()["items"] if c["is_default"]]
    return str(default)


async def test_a_documents_view_shows_its_chunks_and_history_and_deletes_after_asking(
    page: Page, world: World
) -> None:
    title = f"Travel policy {uuid.uuid4().hex[:6]}"
    text = "\n\n".join(
        f"## Rule {i}\n\n" + "Trains beat planes under 600 km. " * 90 for i in range(6)
    )
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
        headers = await api_login(client, world.admin_email)
        added = await client.post(
            "/kb/documents", json={"title": title, "text": text}, headers=headers
        )
        doc_id = added.json()["id"]
        deadline = time.monotonic() + 60
        while (await client.get(f"/kb/documents/{doc_id}", headers=headers)).json()[
            "status"
        ] != "ready":
            assert time.monotonic() < deadline
            await asyncio.sleep(0.2)
        document = (await client.get(f"/kb/documents/{doc_id}", headers=headers)).json()
        assert document["chunk_count"] > 10, document  # more than one page of chunks
    await sign_in(page, world, world.admin_email)
    await expect(page.locator("#message")).to_be_visible()
    await page.goto(f"{world.url}/#/admin/kb")
    await page.locator("tbody a", has_text=title).click()
    await expect(page.locator("h1")).to_have_text(title)
    history = page.locator("section[aria-labelledby=doc-history] tbody tr")  # newest first
    await expect(history.first).to_contain_text("ready")
    await expect(history.last).to_contain_text("added")
    chunk_rows = page.locator("#doc-chunks ~ div tbody tr")
    await expect(chunk_rows.first).to_contain_text("Rule 0")
    assert await chunk_rows.count() == 10
    await (
        page.locator("section", has=page.locator("#doc-chunks"))
        .get_by_role("button", name="Next")
        .click()
    )
    await expect(chunk_rows.first).not_to_contain_text("Rule 0")
    await screenshot(page, "admin-kb-document")
    assert await audit(page) == []

    await page.get_by_role("button", name="Delete document").click()
    dialog = page.locator("dialog.confirm")
    await expect(dialog).to_be_visible()
    await dialog.get_by_role("button", name="Cancel").click()
    await expect(page.locator("h1")).to_have_text(title)  # nothing happened
    await page.get_by_role("button", name="Delete document").click()
    await dialog.get_by_role("button", name="Delete document").click()
    await page.wait_for_url(lambda url: url.endswith("#/admin/kb"))
    await expect(page.locator("tbody a", has_text=title)).to_have_count(0)


async def test_api_keys_are_listed_a_page_at_a_time(page: Page, world: World) -> None:
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
        headers = await api_login(client, world.admin_email)
        for i in range(12):
            created = await client.post(
                "/admin/api-keys", json={"name": f"paged-{i:02d}"}, headers=headers
            )
            assert created.status_code == 201
    await sign_in(page, world, world.admin_email)
    await expect(page.locator("#message")).to_be_visible()
    await page.goto(f"{world.url}/#/admin/users")
    keys = page.locator("form", has=page.locator("#keys-title"))
    await expect(keys.locator("tbody tr")).to_have_count(10)
    await expect(keys.locator("tbody tr").first).to_contain_text("paged-11")
    await keys.get_by_role("button", name="Next").click()
    await expect(keys.locator("tbody tr").first).not_to_contain_text("paged-11")
    await expect(keys.get_by_text("Page 2")).to_be_visible()
    await screenshot(page, "admin-keys-paged")


async def test_no_admin_page_scrolls_sideways_on_a_phone(page: Page, world: World) -> None:
    """At 390 px a table scrolls inside its own box; the page itself never pans sideways
    (a visually hidden column heading, placed absolutely, widened it by 140 px)."""
    await sign_in(page, world, world.admin_email)
    await expect(page.locator("#message")).to_be_visible()
    await page.set_viewport_size(NARROW)
    try:
        for route in ("kb", "collections", "groups", "users", "faqs", "sso", "audit"):
            await page.goto(f"{world.url}/#/admin/{route}")
            await expect(page.locator("h1")).to_be_visible()
            await page.wait_for_timeout(150)
            wide = await page.evaluate("document.documentElement.scrollWidth")
            assert wide <= NARROW["width"], (route, wide)
    finally:
        await page.set_viewport_size(WIDE)
