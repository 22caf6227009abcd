"""The chat page in a real browser: streaming, citations, stop, resume after a network drop,
attachments, and hostile Markdown rendered inert."""

from __future__ import annotations

import re
import time
import uuid

import httpx
import pytest
from playwright.async_api import FilePayload, Page, Route, expect

from tests.factories import DEFAULT_PASSWORD
from tests.web.conftest import (
    NARROW,
    SCREENSHOTS,
    WIDE,
    World,
    api_login,
    screenshot,
    sign_in,
    watch_of,
)

LAST = ".turn:last-of-type"


async def new_chat(page: Page, world: World, *, signed_in: bool = False) -> None:
    """Sign in (unless the page is), open a new chat (stored by its first message)."""
    if not signed_in:
        await sign_in(page, world, world.admin_email)
    await expect(page.locator("#message")).to_be_visible()
    await page.click("text=New chat")
    await page.wait_for_url(lambda url: url.endswith("#/new"))
    await expect(page.locator(".conv-title")).to_have_text("New chat")


async def ask(page: Page, question: str) -> None:
    await page.fill("#message", question)
    await page.keyboard.press("Enter")


async def test_login_lands_in_a_conversation_streams_and_cites(page: Page, world: World) -> None:
    await sign_in(page, world, world.admin_email)
    await expect(page.locator("#message")).to_be_visible()
    # The newest conversation, or a new chat when there is none yet (nothing stored for it).
    assert "#/c/" in page.url or page.url.endswith("#/new"), page.url
    await new_chat(page, world, signed_in=True)
    await ask(page, "What is the refund policy?")
    await page.wait_for_url(lambda url: "#/c/" in url)
    session_id = page.url.rsplit("/", 1)[-1]
    await expect(page.locator(f"a[href='#/c/{session_id}'][aria-current=page]")).to_be_visible()
    answer = page.locator(f"{LAST} .answer")
    # Progressive: some words are on screen while the turn is still answering.
    await expect(answer).to_contain_text("word3")
    assert await page.locator(LAST).get_attribute("data-status") == "pending"
    await expect(page.locator(LAST)).to_have_attribute("data-status", "complete")
    await expect(answer).to_contain_text("word23")
    live = await answer.inner_text()
    await expect(page.locator("#announcer")).to_contain_text("Answer:")
    await screenshot(page, "chat")
    await page.emulate_media(color_scheme="dark")
    await screenshot(page, "chat-dark")
    await page.emulate_media(color_scheme="light")

    # The stored answer is what `done` showed: the same text rendered after a reload.
    async with httpx.AsyncClient(base_url=world.url) as client:
        headers = await api_login(client, world.admin_email)
        turns = (await client.get(f"/sessions/{session_id}/turns", headers=headers)).json()
    assert "[1]" in turns["items"][0]["answer"]

    await page.locator(f"{LAST} .cite").first.click()
    panel = page.locator("#panel")
    await expect(panel).to_be_visible()
    await expect(panel.locator(".source.current")).to_contain_text("Refund policy")
    await expect(panel.locator(".source.current")).to_contain_text("Knowledge base document")
    await expect(panel.locator(".source.current .relevance")).to_have_attribute(
        "aria-label", re.compile(r"Relevance: rank 1 of \d")
    )
    await expect(panel.locator(".source.current .snippet")).to_contain_text("14 days")
    await screenshot(page, "chat-sources")
    await page.keyboard.press("Escape")
    await expect(panel).to_be_hidden()
    await page.click(f"{LAST} >> text=How this answer was built")
    await expect(panel).to_contain_text("Quality score")
    await expect(panel).to_contain_text("Knowledge base:")
    await expect(panel).to_contain_text("question (weight 1): What is the refund policy?")
    await screenshot(page, "chat-build")

    await page.reload()
    await expect(page.locator(f"{LAST} .answer")).to_have_text(live)


async def test_stop_mid_answer_then_reload_shows_the_incomplete_turn(
    page: Page, world: World
) -> None:
    await new_chat(page, world)
    await ask(page, "Tell me slowly about the refund policy")
    await expect(page.locator(f"{LAST} .answer")).to_contain_text("part3")
    await page.keyboard.press("Escape")
    await expect(page.locator(LAST)).to_have_attribute("data-status", "incomplete")
    await expect(page.locator(f"{LAST} .status")).to_contain_text("incomplete")
    stopped = await page.locator(f"{LAST} .answer").inner_text()
    assert "part119" not in stopped
    await page.reload()
    await expect(page.locator(LAST)).to_have_attribute("data-status", "incomplete")
    await expect(page.locator(f"{LAST} .answer")).to_contain_text("part3")


@pytest.mark.parametrize("outage", ["hangs", "refuses"])
async def test_stop_works_at_once_while_the_server_cannot_be_reached(
    page: Page, world: World, outage: str
) -> None:
    """Issue 28 item 3: with /chat/stream unreachable, Stop gave Send back after 148 s."""
    await new_chat(page, world)

    async def unreachable(route: Route) -> None:
        if outage == "refuses":
            await route.abort("connectionrefused")
        # "hangs": never answered, as behind a dead proxy

    await page.route("**/chat/stream", unreachable)
    await ask(page, "What is the refund policy?")
    send = page.locator(".composer button[type=submit]")
    await expect(send).to_be_disabled()
    await page.wait_for_timeout(500)
    started = time.monotonic()
    await page.click(".composer button:has-text('Stop')")
    await expect(send).to_be_enabled(timeout=2_000)
    assert time.monotonic() - started < 2.0
    await expect(page.locator(LAST)).to_have_attribute("data-status", "incomplete")
    await expect(page.locator(f"{LAST} .status")).to_contain_text("Stopped")
    await expect(page.locator(".composer button:has-text('Stop')")).to_be_hidden()
    # The question comes back to send again, and once the server answers, it does.
    assert await page.input_value("#message") == "What is the refund policy?"
    await page.unroute_all(behavior="ignoreErrors")
    await page.keyboard.press("Enter")
    await expect(page.locator(LAST)).to_have_attribute("data-status", "complete")
    assert not watch_of(page).errors


async def test_a_dropped_connection_resumes_without_doubled_or_missing_text(
    page: Page, world: World
) -> None:
    await new_chat(page, world)
    await ask(page, "Explain slowly how refunds work")
    await expect(page.locator(f"{LAST} .answer")).to_contain_text("part5")
    await page.context.set_offline(True)
    await expect(page.locator(f"{LAST} .status")).to_contain_text("resuming")
    await page.wait_for_timeout(1500)
    await page.context.set_offline(False)
    await expect(page.locator(LAST)).to_have_attribute("data-status", "complete", timeout=40_000)
    words = (await page.locator(f"{LAST} .answer").inner_text()).split()
    assert words == [f"part{i}" for i in range(120)]
    assert not watch_of(page).errors


async def test_an_attachment_becomes_ready_and_is_still_cited_three_turns_later(
    page: Page, world: World
) -> None:
    await new_chat(page, world)
    await page.set_input_files(
        "#attach-input",
        files=FilePayload(
            name="lanterns.md",
            mimeType="text/markdown",
            buffer=b"# Zebra protocol\n\nThe zebra protocol requires three blue lanterns "
            b"on the north gate.\n",
        ),
    )
    chip = page.locator(".chip")
    await expect(chip).to_have_attribute("data-status", "ready", timeout=30_000)
    await screenshot(page, "chat-attachment")
    for question in (
        "Hello there, what is the refund policy?",
        "And for monthly plans?",
        "Thanks, anything on annual plans?",
    ):
        await ask(page, question)
        await expect(page.locator(LAST)).to_have_attribute("data-status", "complete")
    await ask(page, "What does the zebra protocol require?")
    await expect(page.locator(LAST)).to_have_attribute("data-status", "complete")
    await page.locator(f"{LAST} .cite").first.click()
    await expect(page.locator("#panel")).to_contain_text("Attachment")
    await expect(page.locator("#panel")).to_contain_text("blue lanterns")
    # Removable from the conversation.
    await page.click(".chip button")
    await expect(chip).to_have_count(0)


async def test_hostile_markdown_in_answers_and_documents_renders_inert(
    page: Page, world: World
) -> None:
    await new_chat(page, world)
    await ask(page, "Show me the hostile note")
    await expect(page.locator(LAST)).to_have_attribute("data-status", "complete")
    answer = page.locator(f"{LAST} .answer")
    await expect(answer).to_contain_text("<img src=x")
    await expect(answer).to_contain_text("<script>")
    await page.locator(f"{LAST} .turn-actions button").first.click()
    panel = page.locator("#panel")
    await expect(panel).to_contain_text("Hostile document")
    await expect(panel).to_contain_text("<script>window.__xss = 5; alert(5)</script>")
    await screenshot(page, "chat-hostile")
    assert await page.evaluate("window.__xss") is None, "no injected script ran"
    assert await page.locator(".turns img, #panel img, .turns script, #panel script").count() == 0
    assert await page.locator("a[href^='javascript']").count() == 0
    assert await answer.locator("a").count() == 0
    assert not watch_of(page).dialogs


async def test_keyboard_and_errors_a_person_understands(page: Page, world: World) -> None:
    await new_chat(page, world)
    await page.fill("#message", "first line")
    await page.keyboard.press("Shift+Enter")
    await page.keyboard.type("second line")
    assert await page.input_value("#message") == "first line\nsecond line"
    await page.keyboard.press("Enter")
    await expect(page.locator(f"{LAST} .question")).to_contain_text("first line\nsecond line")
    await expect(page.locator(LAST)).to_have_attribute("data-status", "complete")

    await page.set_input_files(
        "#attach-input",
        files=FilePayload(
            name="photo.png", mimeType="image/png", buffer=b"\x89PNG\r\n\x1a\n" + b"0" * 64
        ),
    )
    await expect(page.locator(".composer .error").first).to_contain_text(
        "This file type is refused"
    )
    message = await page.evaluate(
        "import('/static/js/api.js').then(m => m.humanError("
        "new m.ApiError(429, 'rate_limited', 'x', 7)))"
    )
    assert message == "Too many requests: try again in 7 s."
    quota = await page.evaluate(
        "import('/static/js/api.js').then(m => m.humanError("
        "new m.ApiError(429, 'token_quota_exceeded', 'x', 7200)))"
    )
    assert quota.startswith("Today's token quota is used up")


async def test_a_reload_mid_answer_follows_the_running_turn_to_its_end(
    page: Page, world: World
) -> None:
    await new_chat(page, world)
    await ask(page, "Describe slowly every refund rule")
    await expect(page.locator(f"{LAST} .answer")).to_contain_text("part3")
    await page.reload()
    await expect(page.locator(LAST)).to_have_attribute("data-status", "complete", timeout=40_000)
    words = (await page.locator(f"{LAST} .answer").inner_text()).split()
    assert words == [f"part{i}" for i in range(120)]


async def test_the_sidebar_pages_renames_and_deletes_conversations(
    page: Page, world: World
) -> None:
    email = f"pager-{uuid.uuid4().hex[:8]}@example.com"
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
        admin = await api_login(client, world.admin_email)
        body = {"email": email, "password": DEFAULT_PASSWORD}
        assert (await client.post("/admin/users", json=body, headers=admin)).status_code == 201
        headers = await api_login(client, email)
        for i in range(24):
            created = await client.post(
                "/sessions", json={"title": f"Topic {i:02d}"}, headers=headers
            )
            assert created.status_code == 201
    await sign_in(page, world, email)
    await expect(page.locator(".conv-title")).to_have_text("Topic 23")  # the newest
    items = page.locator(".session-list li")
    await expect(items).to_have_count(20)
    await expect(items.first).to_contain_text("Topic 23")
    await page.click("text=Load more")
    await expect(items).to_have_count(24)
    await expect(items.last).to_contain_text("Topic 00")
    await page.set_viewport_size(NARROW)  # on a phone the list opens over the conversation
    await expect(page.locator("#sidebar")).to_be_hidden()
    await page.click("button:has-text('Conversations')")
    await expect(page.locator("#sidebar")).to_be_visible()
    await page.screenshot(path=str(SCREENSHOTS / "chat-sidebar-390.png"))
    await page.click("text=Close the list")
    await expect(page.locator("#sidebar")).to_be_hidden()
    await page.set_viewport_size(WIDE)

    await page.click("button:has-text('Rename')")
    await page.fill("input[aria-label='Conversation title']", "Renamed topic")
    await page.keyboard.press("Enter")
    await expect(page.locator(".conv-title")).to_have_text("Renamed topic")
    await expect(items.first).to_contain_text("Renamed topic")

    before = page.url
    await page.click("button:has-text('Delete')")
    await page.click("button:has-text('Really delete?')")
    await page.wait_for_url(lambda url: url != before and "#/c/" in url)
    await expect(page.locator(".session-list")).not_to_contain_text("Renamed topic")


async def test_rename_closes_once_on_enter_escape_and_blur_without_errors(
    page: Page, world: World
) -> None:
    """Issue 28 item 8: Enter without a change reopened the editor, and every close threw
    "Failed to execute 'replaceWith' on 'Element'"."""
    await new_chat(page, world)
    await ask(page, "Is there a refund?")  # a new chat is stored (and renamable) from here
    await expect(page.locator(LAST)).to_have_attribute("data-status", "complete")
    title = page.locator(".conv-title")
    editor = page.locator("input[aria-label='Conversation title']")
    rename = page.locator("button:has-text('Rename')")

    await rename.click()
    await expect(editor).to_be_focused()
    await page.keyboard.press("Enter")  # no change
    await expect(editor).to_have_count(0)
    await page.wait_for_timeout(300)
    await expect(editor).to_have_count(0)  # not reopened
    await expect(title).to_have_text("Is there a refund?")
    await expect(rename).to_be_focused()

    await rename.click()
    await page.keyboard.type("Trip planning")
    await page.keyboard.press("Enter")
    await expect(editor).to_have_count(0)
    await expect(title).to_have_text("Trip planning")
    await expect(page.locator(".session-list a[aria-current=page]")).to_contain_text(
        "Trip planning"
    )

    await rename.click()
    await page.keyboard.type("Discarded")
    await page.keyboard.press("Escape")
    await expect(editor).to_have_count(0)
    await expect(title).to_have_text("Trip planning")

    await rename.click()
    await page.keyboard.type("Saved on blur")
    await page.click("#message")
    await expect(editor).to_have_count(0)
    await expect(title).to_have_text("Saved on blur")
    await expect(page.locator("#message")).to_be_focused()
    assert watch_of(page).errors == []
