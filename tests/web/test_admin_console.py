"""The admin console's lists and controls (issue 28, item 2): the role select on the Users
page shows its whole value at 1440 and 390 px."""

from __future__ import annotations

from playwright.async_api import Page, expect

from tests.web.conftest import NARROW, WIDE, World, screenshot, sign_in

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
