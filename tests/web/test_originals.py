"""A source opens its original (issue 29, item 4): the sources panel fetches the file with
the session's token; anything but a PDF is saved as a download, never rendered in the app's
origin."""

from __future__ import annotations

from typing import Any

from playwright.async_api import Page, expect

from tests.web.conftest import World, sign_in
from tests.web.test_answers import SHOW, extractive_turn

FIRST_HIT = """async () => {
    const base = document.querySelector('script[type=module]').src.replace(/main\\.js$/, '');
    const { api } = await import(base + 'api.js');
    const found = await api('/kb/search', { method: 'POST', body: { query: 'refund', k: 1 } });
    return found.items[0];
}"""


async def test_a_sources_original_is_saved_never_rendered_here(page: Page, world: World) -> None:
    await sign_in(page, world, world.member_email)
    await expect(page.locator("#message")).to_be_visible()
    hit: dict[str, Any] = await page.evaluate(FIRST_HIT)
    turn = extractive_turn(
        "Extractive answer (no language model is configured): Refunds are paid within 14 days. [1]",
        [1],
    )
    source = {
        "n": 1,
        "id": hit["chunk_id"],
        "kind": "kb",
        "source_id": hit["document_id"],
        "title": hit["title"],
        "score": 1.0,
        "snippet": hit["snippet"],
        "location": {"page": 3},
    }
    turn["context_metadata"]["sources"] = [source]
    turn["sources"] = [source]
    await page.evaluate(SHOW, turn)
    view = page.locator(f"article[data-turn-id='{turn['id']}']")
    await view.get_by_role("button", name="Sources (1)").click()
    opener = page.locator("#panel").get_by_role("button", name="Open the original at page 3")
    async with page.expect_download() as download:
        await opener.click()
    saved = await download.value
    assert saved.suggested_filename == hit["title"]
    assert page.url.startswith(world.url)  # the app stayed where it was
