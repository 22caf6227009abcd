"""Feedback and pins in the browser (issue 28, items 3 and 5): a thumb and its comment given
on an answer are shown again after a reload and read by an admin in the audit (its list,
its `feedback` filter, the turn's record); a pinned conversation is listed first under
"Pinned", and stays so after a reload."""

from __future__ import annotations

import httpx
from playwright.async_api import Page, expect

from tests.web.conftest import World, api_login, screenshot
from tests.web.test_chat import LAST, ask, new_chat

COMMENT = "It left out the annual plans."


async def test_a_thumb_and_its_comment_round_trip_to_the_admin_audit(
    page: Page, world: World
) -> None:
    await new_chat(page, world)
    await ask(page, "What is the refund policy?")
    await expect(page.locator(LAST)).to_have_attribute("data-status", "complete")
    up, down = page.locator(f"{LAST} .thumb.up"), page.locator(f"{LAST} .thumb.down")
    await expect(up).to_have_attribute("aria-pressed", "false")
    await down.click()
    await expect(down).to_have_attribute("aria-pressed", "true")
    comment = page.locator(f"{LAST} .feedback-comment textarea")
    await expect(comment).to_be_focused()
    await comment.fill(COMMENT)
    await screenshot(page, "chat-feedback")
    await page.keyboard.press("Enter")
    await expect(page.locator(f"{LAST} .feedback-note")).to_have_text(
        "Thanks — your comment is saved."
    )
    await expect(comment).to_be_hidden()
    session_id = page.url.rsplit("/", 1)[-1]

    await page.reload()
    await expect(page.locator(LAST)).to_have_attribute("data-status", "complete")
    await expect(page.locator(f"{LAST} .thumb.down")).to_have_attribute("aria-pressed", "true")
    await expect(page.locator(f"{LAST} .thumb.up")).to_have_attribute("aria-pressed", "false")

    await page.goto(f"{world.url}/#/admin/audit")
    await expect(page.locator("h1")).to_have_text("Audit")
    await page.fill("#f-session_id", session_id)
    await page.select_option("#f-feedback", "down")
    await page.click("form.filters button[type=submit]")
    rows = page.locator("tbody tr")
    await expect(rows).to_have_count(1)
    await expect(rows.first).to_contain_text("thumbs down")
    await expect(rows.first).to_contain_text(COMMENT)
    await screenshot(page, "admin-audit-feedback")
    await page.select_option("#f-feedback", "up")
    await page.click("form.filters button[type=submit]")
    await expect(page.locator("main")).to_contain_text("No turn matches.")
    await page.select_option("#f-feedback", "down")
    await page.click("form.filters button[type=submit]")
    await rows.first.locator("text=Open").click()
    await expect(page.locator("h1")).to_have_text("Audit: one turn")
    record = page.locator("section.build dl")
    await expect(record).to_contain_text("thumbs down")
    await expect(record).to_contain_text(COMMENT)

    # Changing one's mind replaces the thumb (and the comment written for the old one).
    await page.goto(f"{world.url}/#/c/{session_id}")
    await expect(page.locator(LAST)).to_have_attribute("data-status", "complete")
    await page.locator(f"{LAST} .thumb.up").click()
    await expect(page.locator(f"{LAST} .thumb.up")).to_have_attribute("aria-pressed", "true")
    await expect(page.locator(f"{LAST} .thumb.down")).to_have_attribute("aria-pressed", "false")
    async with httpx.AsyncClient(base_url=world.url) as client:
        headers = await api_login(client, world.admin_email)
        given = (await client.get(f"/sessions/{session_id}/feedback", headers=headers)).json()
    assert [(f["value"], f["comment"]) for f in given["items"]] == [("up", None)]
    # The same thumb again takes it back.
    await page.locator(f"{LAST} .thumb.up").click()
    await expect(page.locator(f"{LAST} .feedback-note")).to_have_text("Feedback removed.")
    await expect(page.locator(f"{LAST} .thumb.up")).to_have_attribute("aria-pressed", "false")


async def test_a_pinned_conversation_is_listed_first_and_stays_pinned_after_a_reload(
    page: Page, world: World
) -> None:
    await new_chat(page, world)
    await ask(page, "Which plans does the refund policy cover?")
    await expect(page.locator(LAST)).to_have_attribute("data-status", "complete")
    await new_chat(page, world, signed_in=True)
    await ask(page, "A newer conversation that stays unpinned")
    await expect(page.locator(LAST)).to_have_attribute("data-status", "complete")
    older = page.locator(".session-list a", has_text="Which plans does the refund policy")
    await older.click()
    await expect(page.locator(".conv-title")).to_contain_text("Which plans")
    pin = page.locator(".conv-actions .pin")
    await expect(pin).to_have_text("Pin")
    await pin.click()
    await expect(pin).to_have_text("Unpin")
    first_group = page.locator(".session-list .session-group-title").first
    await expect(first_group).to_have_text("Pinned")
    first_item = page.locator(".session-list ul").first.locator("li")
    await expect(first_item).to_have_count(1)
    await expect(first_item).to_contain_text("Which plans")
    await screenshot(page, "chat-pinned")

    await page.reload()
    await expect(page.locator(".conv-title")).to_contain_text("Which plans")
    await expect(pin).to_have_text("Unpin")
    await expect(first_group).to_have_text("Pinned")
    await expect(first_item).to_contain_text("Which plans")

    await pin.click()
    await expect(pin).to_have_text("Pin")
    await expect(
        page.locator(".session-list .session-group-title", has_text="Pinned")
    ).to_have_count(0)
