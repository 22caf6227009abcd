"""A long answer in the browser: rendered as it streams without long main-thread tasks, and
followed to its end unless the reader scrolled up (then "Jump to latest" brings it back)."""

from __future__ import annotations

from playwright.async_api import Page, expect

from tests.web.conftest import World, screenshot
from tests.web.fake_model import long_answer
from tests.web.test_chat import LAST, ask, new_chat

# Every heading element put into the page, counted as it is added: a streamed answer that is
# rendered whole on every frame adds its headings again each time (the cause of the long
# tasks, 181 ms for 27k characters); rendered block by block, each once. The long tasks
# themselves are measured by bench/web.py, not asserted here (a loaded machine stretches them).
ADDED_HEADINGS = """
window.__addedHeadings = 0;
new MutationObserver((records) => {
  for (const record of records)
    for (const node of record.addedNodes)
      if (node.nodeType === 1)
        window.__addedHeadings += (node.matches("h4") ? 1 : 0) + node.querySelectorAll("h4").length;
}).observe(document, { childList: true, subtree: true });
"""
GAP = "t => t.scrollHeight - t.scrollTop - t.clientHeight"


async def test_a_27k_character_answer_renders_each_finished_block_once_while_streaming(
    page: Page, world: World
) -> None:
    await page.add_init_script(ADDED_HEADINGS)
    await new_chat(page, world)
    await page.evaluate("window.__addedHeadings = 0")
    await ask(page, "Write the long answer")
    answer = page.locator(f"{LAST} .answer")
    await expect(answer).to_contain_text("Part 2")
    assert await page.locator(LAST).get_attribute("data-status") == "pending"
    await expect(page.locator(LAST)).to_have_attribute("data-status", "complete", timeout=60_000)
    text = long_answer()
    parts = text.count("## Part ")
    added = await page.evaluate("window.__addedHeadings")
    # Linear, not quadratic: each heading is redrawn only while it is the unfinished last
    # block (a frame or a few, as its words arrive) and once in the final render. Rendered
    # whole on every frame, every heading so far was added again each frame (thousands).
    assert added <= 8 * parts, f"{added} headings added for {parts} in the answer"

    # All of it, rendered as the right elements (as a full render of the same text would be).
    await expect(answer.locator("h4")).to_have_count(parts)
    await expect(answer.locator("table")).to_have_count(parts)
    await expect(answer.locator("pre code.language-python")).to_have_count(parts)
    await expect(answer.locator("li > ul > li")).to_have_count(3 * parts)
    await expect(answer.locator(".cite")).to_have_count(parts)
    await expect(answer.locator("pre code .hljs-keyword").first).to_have_text("def")


async def test_the_view_follows_the_stream_until_the_reader_scrolls_up(
    page: Page, world: World
) -> None:
    await new_chat(page, world)
    turns = page.locator(".turns")
    jump = page.get_by_role("button", name="Jump to latest")
    await ask(page, "Write the long answer")
    answer = page.locator(f"{LAST} .answer")
    await expect(answer).to_contain_text("Part 3")
    await page.wait_for_timeout(200)
    assert await turns.evaluate(GAP) < 60, "the view follows the stream"
    await expect(jump).to_be_hidden()

    box = await turns.bounding_box()
    assert box
    await page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    await page.mouse.wheel(0, -800)
    await expect(jump).to_be_visible()
    top = await turns.evaluate("t => t.scrollTop")
    await page.wait_for_timeout(600)
    assert await page.locator(LAST).get_attribute("data-status") == "pending"
    assert abs(await turns.evaluate("t => t.scrollTop") - top) < 2, "the reader stays put"
    assert await turns.evaluate(GAP) > 200
    await screenshot(page, "chat-jump-to-latest")

    await jump.click()
    await expect(jump).to_be_hidden()
    await page.wait_for_timeout(400)
    assert await turns.evaluate(GAP) < 60, "following again"
    await expect(page.locator(LAST)).to_have_attribute("data-status", "complete", timeout=60_000)
    await page.wait_for_timeout(200)
    assert await turns.evaluate(GAP) < 60, "at the end when it ends"
