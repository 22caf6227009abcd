"""The browser tests' world: one `threadline serve` process for the whole package (the fake
model of fake_model.py behind it), one tenant with an admin, a member and a small knowledge
base, and Debian's chromium driven by Playwright (never a downloaded browser)."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Browser, Dialog, Page, ViewportSize, async_playwright
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

from app.config import Settings
from app.core.database_urls import resolve_database_urls
from tests.factories import DEFAULT_PASSWORD, make_tenant, make_user
from tests.server_process import ServerProcess, server_processes
from tests.services import require_service
from tests.web.fake_model import fake_model

SCREENSHOTS = Path(__file__).parent / "screenshots"
# Where signing in lands: the latest conversation, or a new one.
LANDED = re.compile(r"#/(c/[^/]+|new)$")
WIDE: ViewportSize = {"width": 1440, "height": 900}
NARROW: ViewportSize = {"width": 390, "height": 844}
KB_DOCUMENTS = [
    {
        "title": "Refund policy",
        "text": "Refunds are paid within 14 days of a written request. The refund policy "
        "covers annual plans and monthly plans alike.",
    },
    {
        # Each payload, if it ever ran, would both set `window.__xss` and open a dialog.
        "title": 'Hostile <img src=x onerror="window.__xss=4;alert(4)"> note',
        "text": "Hostile document: <script>window.__xss = 5; alert(5)</script> and "
        '<img src=x onerror="window.__xss=6;alert(6)"> and '
        "[bad link](javascript:window.__xss=7;alert(7)).",
    },
]


def chromium_path() -> str:
    """Debian's chromium (THREADLINE_TEST_CHROMIUM to use another)."""
    path = os.environ.get("THREADLINE_TEST_CHROMIUM") or shutil.which("chromium")
    if not path:
        require_service("chromium for the browser tests: apt-get install chromium")
    return str(path)


@dataclass
class World:
    url: str
    tenant: str
    admin_email: str
    member_email: str
    password: str = DEFAULT_PASSWORD


@pytest.fixture(scope="package")
def model_url() -> Iterator[str]:
    with fake_model() as url:
        yield url


@pytest.fixture(scope="package")
def web_server(test_database: Settings, model_url: str) -> Iterator[ServerProcess]:
    shared = test_database.model_copy(update={"redis_prefix": f"tl-web-{uuid.uuid4().hex[:8]}:"})
    env = {
        "THREADLINE_LLM": "openai-compatible",
        "OPENAI_BASE_URL": model_url,
        "OPENAI_API_KEY": "fake",
        "THREADLINE_AGENT_TOOLS": "false",
        "THREADLINE_SSE_RESUME_GRACE_SECONDS": "30",
        "THREADLINE_INGEST_WORKERS": "0",
        "THREADLINE_INGESTION_RECOVERY_SECONDS": "600",
        "THREADLINE_PII_ANONYMIZE": "false",
    }
    with server_processes(shared, 1, **env) as (server,):
        yield server


@pytest.fixture(scope="package")
async def world(test_database: Settings, web_server: ServerProcess) -> World:
    engine = create_async_engine(resolve_database_urls(test_database).app)
    async with AsyncSession(engine, expire_on_commit=False) as db:
        tenant = await make_tenant(db)
        admin = await make_user(db, tenant, role="admin")
        member = await make_user(db, tenant)
    await engine.dispose()
    world = World(web_server.url, tenant.name, admin.email, member.email)
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
        headers = await api_login(client, world.admin_email)
        ids = []
        for doc in KB_DOCUMENTS:
            response = await client.post("/kb/documents", json=doc, headers=headers)
            assert response.status_code in (200, 202), response.text
            ids.append(response.json()["id"])
        deadline = time.monotonic() + 60
        for doc_id in ids:
            while (await client.get(f"/kb/documents/{doc_id}", headers=headers)).json()[
                "status"
            ] != "ready":
                assert time.monotonic() < deadline, "the knowledge base did not become ready"
                await asyncio.sleep(0.2)
    return world


async def api_login(client: httpx.AsyncClient, email: str) -> dict[str, str]:
    """Bearer headers for `email` (the tests' API calls beside the browser)."""
    response = await client.post("/auth/token", json={"email": email, "password": DEFAULT_PASSWORD})
    assert response.status_code == 200, response.text
    return {"Authorization": f"Bearer {response.json()['access_token']}"}


@pytest.fixture(scope="package")
async def browser() -> AsyncIterator[Browser]:
    path = chromium_path()
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=path)
        yield launched
        await launched.close()


@dataclass
class Watch:
    """What a page did that a test must see: dialogs opened, script errors."""

    dialogs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    async def dialog(self, dialog: Dialog) -> None:
        self.dialogs.append(dialog.message)
        await dialog.dismiss()


_WATCHES: dict[int, Watch] = {}


@pytest.fixture
async def page(browser: Browser) -> AsyncIterator[Page]:
    context = await browser.new_context(viewport=WIDE, accept_downloads=True)
    opened = await context.new_page()
    watch = _WATCHES[id(opened)] = Watch()
    opened.on("dialog", watch.dialog)
    opened.on("pageerror", lambda error: watch.errors.append(str(error)))
    yield opened
    del _WATCHES[id(opened)]
    await context.close()


def watch_of(page: Page) -> Watch:
    """The dialogs and script errors `page` has seen."""
    return _WATCHES[id(page)]


async def submit_login(page: Page, world: World, email: str, password: str | None = None) -> None:
    """Fill in the login form and send it (a refusal is for the caller to see)."""
    await page.goto(world.url + "/")
    await page.fill("#email", email)
    await page.fill("#password", password or world.password)
    await page.click("form.login button[type=submit]")


async def sign_in(page: Page, world: World, email: str, password: str | None = None) -> None:
    """Log in through the form; returns once the page behind it is shown."""
    await submit_login(page, world, email, password)
    await page.wait_for_url(LANDED)


async def screenshot(page: Page, name: str) -> None:
    """Save the page at 1440 px and at 390 px wide (tests/web/screenshots, not committed)."""
    SCREENSHOTS.mkdir(exist_ok=True)
    await page.screenshot(path=str(SCREENSHOTS / f"{name}-1440.png"))
    await page.set_viewport_size(NARROW)
    await page.wait_for_timeout(150)
    await page.screenshot(path=str(SCREENSHOTS / f"{name}-390.png"))
    await page.set_viewport_size(WIDE)
