"""Answers rendered by the vendored Markdown libraries: every construct as the right element,
code with its language, highlighting and a copy button, and links that are safe."""

from __future__ import annotations

from playwright.async_api import Page, expect

from tests.web.conftest import World, screenshot, watch_of
from tests.web.test_chat import LAST, ask, new_chat


async def test_the_markdown_fixture_renders_as_the_right_elements(page: Page, world: World) -> None:
    await page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    await new_chat(page, world)
    await ask(page, "Render the markdown fixture")
    await expect(page.locator(LAST)).to_have_attribute("data-status", "complete")
    answer = page.locator(f"{LAST} .answer")

    await expect(answer.locator("h4")).to_have_text("Plans compared")  # "##" inside a message
    table = answer.locator("table")
    await expect(table.locator("th")).to_have_text(["Plan", "Refund window"])
    await expect(table.locator("tbody tr")).to_have_count(2)
    await expect(table.locator("tbody tr").first.locator("td")).to_have_text(["Annual", "14 days"])
    await expect(answer.locator("ul > li > ul > li > ul > li")).to_have_text("Level three")
    await expect(answer.locator("ol > li")).to_have_text(["First step", "Second step"])
    boxes = answer.locator("li input[type=checkbox]")
    await expect(boxes).to_have_count(2)
    await expect(boxes.first).to_be_checked()
    await expect(boxes.nth(1)).not_to_be_checked()
    await expect(boxes.first).to_be_disabled()

    code = answer.locator("pre code.language-python")
    await expect(code).to_contain_text("def refund_allowed(days):")
    await expect(answer.locator(".code-lang")).to_have_text("python")
    await expect(code.locator(".hljs-keyword").first).to_have_text("def")  # highlighted
    assert await answer.locator("pre").get_attribute("tabindex") == "0"  # keyboard-scrollable
    await answer.locator(".copy-code").click()
    await expect(answer.locator(".copy-code")).to_have_text("Copied")
    copied = await page.evaluate("navigator.clipboard.readText()")
    assert copied == "def refund_allowed(days):\n    return days <= 14"

    # Unsafe links: the label as plain text, no "x)" and no "[link removed]" left over.
    text = await answer.inner_text()
    assert "click me and" in text and "the docs and" in text, text
    assert "](" not in text and "link removed" not in text and "javascript" not in text
    assert await answer.locator("a").count() == 0
    await expect(answer).to_contain_text("<b>raw</b> tag")
    assert await answer.locator("b").count() == 0
    await expect(answer.locator(".cite").first).to_be_visible()
    await screenshot(page, "chat-markdown")
    await page.emulate_media(color_scheme="dark")
    await screenshot(page, "chat-markdown-dark")
    await page.emulate_media(color_scheme="light")
    assert await page.evaluate("window.__xss") is None
    assert not watch_of(page).dialogs and not watch_of(page).errors


async def test_links_keep_their_target_only_when_http_or_the_apps_own(
    page: Page, world: World
) -> None:
    await page.goto(world.url + "/")
    cases = {
        "[web](https://example.org/a?b=1)": ("a", "https://example.org/a?b=1", "_blank"),
        "[mine](/#/me)": ("a", "/#/me", None),
        "[js](javascript:alert(1))": ("text", "js", None),
        "[data](data:text/html,<b>x</b>)": ("text", "data", None),
        "[proto](//evil.example/x)": ("text", "proto", None),
        "[the docs]([link removed])": ("text", "the docs", None),
    }
    for source, (kind, expected, target) in cases.items():
        got = await page.evaluate(
            """async (source) => {
                const m = await import('/static/js/markdown.js');
                const el = document.createElement('div');
                el.append(m.renderMarkdown(source));
                const a = el.querySelector('a');
                return a ? ['a', a.getAttribute('href'), a.getAttribute('target'), a.rel]
                         : ['text', el.textContent.trim(), null, ''];
            }""",
            source,
        )
        assert got[:3] == [kind, expected, target], (source, got)
        if kind == "a" and target:
            assert "noopener" in got[3] and "noreferrer" in got[3]
