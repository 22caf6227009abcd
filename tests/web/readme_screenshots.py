"""The README's screenshots from the demo (`make demo`), not from test fixtures:

    python -m tests.web.readme_screenshots [--port 8803]

A fresh embedded PostgreSQL, `threadline migrate` and `threadline demo` (the demo tenant,
its admin and the sample knowledge base), the server with no model configured (the default
install: answers by the extractive responder), then Debian's chromium asks the questions a
new user would and saves docs/screenshots/chat.png (a conversation with its sources open)
and docs/screenshots/audit.png (its turns in the admin audit), at 1440 x 900.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
from pathlib import Path

from playwright.async_api import Page, async_playwright, expect

from app.cli.demo import DEMO_EMAIL, DEMO_PASSWORD
from bench.common import ROOT, bench_database, uvicorn_server
from tests.web.conftest import WIDE, chromium_path

OUT = ROOT / "docs" / "screenshots"
QUESTIONS = (
    "How do I erase my data?",
    "How do administrators add documents to the knowledge base?",
    "Do I need to resend earlier messages in a conversation?",
)


async def _ask(page: Page, question: str) -> None:
    await page.fill("#message", question)
    await page.keyboard.press("Enter")
    last = page.locator(".turn:last-of-type")
    await expect(last).to_have_attribute("data-status", "complete", timeout=60_000)


async def _shoot(base: str) -> None:
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium_path())
        page = await (await browser.new_context(viewport=WIDE)).new_page()
        await page.goto(base + "/")
        await page.fill("#email", DEMO_EMAIL)
        await page.fill("#password", DEMO_PASSWORD)
        await page.click("form.login button[type=submit]")
        await expect(page.locator("#message")).to_be_visible(timeout=30_000)
        await page.goto(base + "/#/new")
        await expect(page.locator(".welcome")).to_contain_text("Try asking")
        for question in QUESTIONS:
            await _ask(page, question)
        session_id = page.url.rsplit("/", 1)[-1]
        last = page.locator(".turn:last-of-type")
        await last.locator(".thumb.up").click()
        comment = last.locator(".feedback-comment textarea")
        await expect(comment).to_be_focused()
        await page.keyboard.press("Escape")  # no comment
        await expect(comment).to_be_hidden()
        sources = last.locator(".turn-actions button", has_text="Sources")
        if await sources.count():
            await sources.click()
            await expect(page.locator("#panel")).to_be_visible()
        await page.mouse.move(0, 0)
        await page.wait_for_timeout(300)
        await page.screenshot(path=str(OUT / "chat.png"))

        await page.goto(f"{base}/#/admin/audit")
        await page.fill("#f-session_id", session_id)
        await page.click("form.filters button[type=submit]")
        await expect(page.locator("tbody tr")).to_have_count(len(QUESTIONS))
        await page.wait_for_timeout(300)
        await page.screenshot(path=str(OUT / "audit.png"))
        await browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=None)
    args = parser.parse_args()
    threadline = str(Path(sys.executable).with_name("threadline"))
    with bench_database() as owner_url:
        env = {
            **os.environ,
            "DATABASE_URL": owner_url,
            "THREADLINE_JWT_SECRET": "readme-screenshots-" + "x" * 32,
            "THREADLINE_LOG_LEVEL": "WARNING",
        }
        subprocess.run([threadline, "migrate"], cwd=ROOT, env=env, check=True)
        subprocess.run([threadline, "demo"], cwd=ROOT, env=env, check=True)
        with uvicorn_server(env, app="app.main:app_factory", port=args.port) as base:
            asyncio.run(_shoot(base))
    print(f"wrote {OUT / 'chat.png'} and {OUT / 'audit.png'}")


if __name__ == "__main__":
    main()
