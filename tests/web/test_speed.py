"""Speed on the wire: every text response compressed (static files once, not per request),
the app's assets under versioned URLs cached for good, and the chat page's first load
<= 100 KB transferred."""

from __future__ import annotations

import gzip
import re
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser, Page, Response, expect

from app.main import create_app
from tests.web.conftest import WIDE, World, api_login, sign_in

FIRST_LOAD_LIMIT = 100 * 1024


async def test_the_chat_pages_first_load_is_compressed_and_at_most_100_kb(
    browser: Browser, world: World
) -> None:
    context = await browser.new_context(viewport=WIDE)
    page = await context.new_page()
    responses: list[Response] = []
    page.on("response", lambda response: responses.append(response))
    await sign_in(page, world, world.member_email)
    await expect(page.locator("#message")).to_be_visible()
    await page.wait_for_load_state("networkidle")
    sizes: list[tuple[str, int, Any]] = []
    for response in responses:
        size = await response.request.sizes()
        transferred = size["responseBodySize"] + size["responseHeadersSize"]
        encoding = await response.header_value("content-encoding")
        sizes.append((response.url, transferred, encoding))
        if size["responseBodySize"] >= 1000:  # the API leaves smaller answers as they are
            assert encoding == "gzip", (response.url, size)
    total = sum(s for _, s, _ in sizes)
    assert total <= FIRST_LOAD_LIMIT, f"{total} bytes: {sorted(sizes, key=lambda s: -s[1])[:6]}"
    print(f"first load: {len(sizes)} responses, {total} bytes transferred")

    # Every asset of the page has a versioned URL, cached for good: a second visit fetches
    # none of them again.
    assets = [r.url for r in responses if "/static/" in r.url or "/assets/" in r.url]
    assert assets and all(re.search(r"/assets/[0-9a-f]{12}/", url) for url in assets), assets
    for response in responses:
        if "/assets/" in response.url:
            assert "immutable" in (await response.header_value("cache-control") or "")
    again = await context.new_page()
    await again.goto(world.url + "/")
    await expect(again.locator("#message")).to_be_visible()
    fetched = await again.evaluate(
        """performance.getEntriesByType('resource')
             .filter((e) => e.name.includes('/assets/') && e.transferSize > 0)
             .map((e) => e.name)"""
    )
    assert fetched == [], fetched
    await context.close()


async def test_api_responses_are_compressed_but_a_stream_is_not(page: Page, world: World) -> None:
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
        headers = {**await api_login(client, world.admin_email), "Accept-Encoding": "gzip"}
        spec = await client.get("/openapi.json", headers=headers)
        assert spec.headers["content-encoding"] == "gzip"
        assert spec.headers["vary"].lower().count("accept-encoding") == 1
        listed = await client.get("/admin/audit/turns?limit=50", headers=headers)
        assert listed.status_code == 200
        if len(listed.content) >= 500:
            assert listed.headers["content-encoding"] == "gzip"
        session = (await client.post("/sessions", json={}, headers=headers)).json()
        async with client.stream(
            "POST",
            "/chat/stream",
            json={"session_id": session["id"], "message": "What is the refund policy?"},
            headers=headers,
        ) as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            assert "content-encoding" not in stream.headers
            async for _ in stream.aiter_bytes():
                pass


@pytest.mark.parametrize(
    "path", ["/", "/static/app.css", "/static/vendor/marked-18.2.1/marked.esm.js"]
)
async def test_a_static_file_is_compressed_once_not_per_request(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = create_app()
    calls: list[int] = []
    real = gzip.compress

    def counting(data: bytes, *args: Any, **kwargs: Any) -> bytes:
        calls.append(len(data))
        return real(data, *args, **kwargs)

    monkeypatch.setattr(gzip, "compress", counting)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        bodies = []
        for _ in range(3):
            response = await client.get(path, headers={"Accept-Encoding": "gzip"})
            assert response.status_code == 200
            assert response.headers["content-encoding"] == "gzip"
            bodies.append(response.content)
        plain = await client.get(path, headers={"Accept-Encoding": "identity"})
        assert "content-encoding" not in plain.headers
    assert bodies[0] == bodies[1] == bodies[2] == plain.content
    assert len(calls) <= 1, f"compressed {len(calls)} times"
