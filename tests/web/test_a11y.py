"""Mobile (390 px) and accessibility: a header of at most 64 px with a collapsible menu, focus
kept inside an open panel, and axe-core (vendored) on every page at 1440 and 390 px, light and
dark: no critical and no serious violation."""

from __future__ import annotations

from typing import Any

from playwright.async_api import Page, expect

from app.web.vendor import PACKAGES
from tests.web.conftest import NARROW, WIDE, World, screenshot
from tests.web.test_chat import LAST, ask, new_chat

AXE = next(p for p in PACKAGES if p.name == "axe-core")
AXE_URL = f"/static/vendor/{AXE.directory}/axe.min.js"
ADMIN = (
    "kb",
    "collections",
    "groups",
    "users",
    "faqs",
    "guardrails",
    "retention",
    "sso",
    "audit",
    "log",
)
PAGES = ["#/me", *(f"#/admin/{key}" for key in ADMIN)]


async def audit(page: Page) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations on the page as it is."""
    if not await page.evaluate("Boolean(window.axe)"):
        await page.add_script_tag(url=AXE_URL)
    result = await page.evaluate(
        """async () => {
            const r = await axe.run(document, { resultTypes: ['violations'] });
            return r.violations.map((v) => ({ id: v.id, impact: v.impact,
              nodes: v.nodes.slice(0, 3).map((n) => n.target.join(' ')) }));
        }"""
    )
    return [v for v in result if v["impact"] in ("critical", "serious")]


async def test_every_page_has_no_serious_axe_violation_wide_narrow_light_dark(
    page: Page, world: World
) -> None:
    found: dict[str, list[dict[str, Any]]] = {}

    async def check(name: str) -> None:
        for size in (WIDE, NARROW):
            await page.set_viewport_size(size)
            for scheme in ("light", "dark"):
                await page.emulate_media(color_scheme=scheme)
                await page.wait_for_timeout(100)
                violations = await audit(page)
                if violations:
                    found[f"{name} {size['width']} {scheme}"] = violations
        await page.set_viewport_size(WIDE)
        await page.emulate_media(color_scheme="light")

    await page.goto(world.url + "/")
    await expect(page.locator("#email")).to_be_visible()
    await check("sign-in")
    await new_chat(page, world)
    await ask(page, "Render the markdown fixture")
    await expect(page.locator(LAST)).to_have_attribute("data-status", "complete")
    await check("chat")
    await page.locator(f"{LAST} .cite").first.click()
    await expect(page.locator("#panel")).to_be_visible()
    await check("chat sources")
    await page.keyboard.press("Escape")
    await page.locator(f"{LAST} > .edit").click()
    await expect(page.locator(f"{LAST} .edit-question textarea")).to_be_focused()
    await check("chat editing the question")
    await page.keyboard.press("Escape")
    await page.locator(f"{LAST} .thumb.down").click()
    await expect(page.locator(f"{LAST} .feedback-comment textarea")).to_be_focused()
    await check("chat with a thumb and its comment box")
    await page.keyboard.press("Escape")
    for route in PAGES:
        await page.goto(f"{world.url}/{route}")
        await expect(page.locator("main h1, main h2").first).to_be_visible()
        await page.wait_for_load_state("networkidle")
        await check(route)
    assert not found, found


async def test_on_a_phone_the_header_is_small_the_menu_collapses_and_panels_keep_focus(
    page: Page, world: World
) -> None:
    await new_chat(page, world)
    await page.set_viewport_size(NARROW)
    header = page.locator("header.top")
    box = await header.bounding_box()
    assert box and box["height"] <= 64, box
    menu = page.get_by_role("button", name="Menu")
    nav = page.locator("nav.top-nav")
    await expect(nav).to_be_hidden()
    await expect(menu).to_have_attribute("aria-expanded", "false")
    await menu.click()
    await expect(nav).to_be_visible()
    await expect(menu).to_have_attribute("aria-expanded", "true")
    await expect(nav.locator("a")).to_have_count(12)  # chat, my data, 10 admin pages
    for link in await nav.locator("a").all():  # every link whole on screen, none cut
        link_box = await link.bounding_box()
        assert link_box and link_box["x"] >= 0 and link_box["x"] + link_box["width"] <= 390
    await screenshot(page, "mobile-menu")
    await page.set_viewport_size(NARROW)
    await page.keyboard.press("Escape")
    await expect(nav).to_be_hidden()
    await expect(menu).to_be_focused()

    # The full-screen sources panel: Tab and Shift+Tab stay inside it.
    await ask(page, "What is the refund policy?")
    await expect(page.locator(LAST)).to_have_attribute("data-status", "complete")
    await page.locator(f"{LAST} .cite").first.click()
    panel = page.locator("#panel")
    await expect(panel).to_be_visible()
    for key in ["Tab"] * 6 + ["Shift+Tab"] * 6:
        await page.keyboard.press(key)
        assert await page.evaluate(
            "document.getElementById('panel').contains(document.activeElement)"
        ), f"focus left the panel after {key}"
    await page.keyboard.press("Escape")
    await expect(panel).to_be_hidden()
