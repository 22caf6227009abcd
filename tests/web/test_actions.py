"""The actions on an answer (issue 28 item 4): copy it as Markdown, regenerate it, edit the
last question and send it again, continue after Stop; a stopped answer keeps its sources."""

from __future__ import annotations

import httpx
from playwright.async_api import Page, expect

from tests.web.conftest import World, api_login, screenshot
from tests.web.test_chat import LAST, ask, new_chat

QUESTION = ".question .question-text"


async def stored_turns(world: World, page: Page) -> list[dict[str, object]]:
    """The conversation's turns as the server has them, oldest first."""
    session_id = page.url.rsplit("/", 1)[-1]
    async with httpx.AsyncClient(base_url=world.url) as client:
        headers = await api_login(client, world.admin_email)
        response = await client.get(f"/sessions/{session_id}/turns", headers=headers)
    return list(reversed(response.json()["items"]))


async def test_copy_puts_the_answer_on_the_clipboard_as_markdown(page: Page, world: World) -> None:
    await page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    await new_chat(page, world)
    await ask(page, "Render the markdown fixture")
    await expect(page.locator(LAST)).to_have_attribute("data-status", "complete")
    copy = page.locator(f"{LAST} .copy-answer")
    await copy.click()
    await expect(copy).to_have_text("Copied")
    copied = await page.evaluate("navigator.clipboard.readText()")
    assert copied == (await stored_turns(world, page))[-1]["answer"]
    assert "| Plan | Refund window |" in copied and "```python" in copied, copied


async def test_regenerate_asks_again_in_a_new_turn_and_keeps_the_old_one(
    page: Page, world: World
) -> None:
    await new_chat(page, world)
    await ask(page, "What is the refund policy?")
    await expect(page.locator(LAST)).to_have_attribute("data-status", "complete")
    first = await page.locator(f"{LAST} .answer").inner_text()
    await page.locator(f"{LAST} .regenerate").click()
    await expect(page.locator(".turn")).to_have_count(2)
    await expect(page.locator(LAST)).to_have_attribute("data-status", "complete")
    await expect(page.locator(".turn").first.locator(".answer")).to_have_text(first)
    await expect(page.locator(f"{LAST} {QUESTION}")).to_have_text("What is the refund policy?")
    stored = await stored_turns(world, page)
    assert [t["user_query"] for t in stored] == ["What is the refund policy?"] * 2
    # Only the last answer offers it (an older one would be answered out of order).
    await expect(page.locator(".turn").first.locator(".regenerate")).to_be_hidden()


async def test_edit_the_last_question_and_send_it_as_a_new_turn(page: Page, world: World) -> None:
    await new_chat(page, world)
    await ask(page, "What is the refund polcy?")
    await expect(page.locator(LAST)).to_have_attribute("data-status", "complete")
    await page.locator(f"{LAST} > .edit").click()
    editor = page.locator(f"{LAST} .edit-question textarea")
    await expect(editor).to_have_value("What is the refund polcy?")
    await expect(editor).to_be_focused()
    # Esc gives the question back unchanged.
    await page.keyboard.press("Escape")
    await expect(editor).to_have_count(0)
    await expect(page.locator(f"{LAST} {QUESTION}")).to_have_text("What is the refund polcy?")

    await page.locator(f"{LAST} > .edit").click()
    await editor.fill("What is the refund policy for annual plans?")
    await screenshot(page, "chat-edit")
    await page.emulate_media(color_scheme="dark")
    await screenshot(page, "chat-edit-dark")
    await page.emulate_media(color_scheme="light")
    await editor.focus()
    await page.keyboard.press("Enter")
    await expect(page.locator(".turn")).to_have_count(2)
    await expect(page.locator(".turn").first.locator(QUESTION)).to_have_text(
        "What is the refund polcy?"
    )
    await expect(page.locator(f"{LAST} {QUESTION}")).to_have_text(
        "What is the refund policy for annual plans?"
    )
    await expect(page.locator(LAST)).to_have_attribute("data-status", "complete")
    stored = await stored_turns(world, page)
    assert [t["user_query"] for t in stored] == [
        "What is the refund polcy?",
        "What is the refund policy for annual plans?",
    ]
    await expect(page.locator(".turn:first-of-type > .edit")).to_be_hidden()


async def test_a_stopped_answer_offers_continue_which_asks_for_the_rest(
    page: Page, world: World
) -> None:
    await new_chat(page, world)
    await ask(page, "Tell me slowly about the refund policy")
    await expect(page.locator(f"{LAST} .answer")).to_contain_text("part3")
    await page.keyboard.press("Escape")
    await expect(page.locator(LAST)).to_have_attribute("data-status", "incomplete")
    await page.reload()  # it is offered after a reload too
    await expect(page.locator(LAST)).to_have_attribute("data-status", "incomplete")
    await expect(page.locator(f"{LAST} .continue")).to_be_visible()
    await screenshot(page, "chat-stopped")
    await page.locator(f"{LAST} .continue").click()
    await expect(page.locator(".turn")).to_have_count(2)
    await expect(page.locator(f"{LAST} {QUESTION}")).to_contain_text("Continue")
    await expect(page.locator(LAST)).to_have_attribute("data-status", "complete")
    # Only the last answer, stopped, offers it.
    await expect(page.locator(".turn").first.locator(".continue")).to_be_hidden()
    await expect(page.locator(f"{LAST} .continue")).to_be_hidden()
    stored = await stored_turns(world, page)
    assert str(stored[-1]["user_query"]).startswith("Continue"), stored[-1]["user_query"]


async def test_a_stopped_answer_keeps_its_sources(page: Page, world: World) -> None:
    await new_chat(page, world)
    await ask(page, "Cite slowly the refund policy")
    await expect(page.locator(f"{LAST} .answer")).to_contain_text("part3")
    await page.keyboard.press("Escape")
    await expect(page.locator(LAST)).to_have_attribute("data-status", "incomplete")
    sources = page.locator(f"{LAST} .turn-actions button", has_text="Sources")
    await expect(sources).to_be_visible(timeout=3000)
    await sources.click()
    await expect(page.locator("#panel .source").first).to_contain_text("Refund policy")
    await page.keyboard.press("Escape")
    await page.reload()
    await expect(page.locator(LAST)).to_have_attribute("data-status", "incomplete")
    await expect(sources).to_be_visible(timeout=3000)
