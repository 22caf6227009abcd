"""The other pages and the browser's security: my data (export, erasure), what a member may
not see, /docs without the internet, the CSP and the refresh cookie."""

from __future__ import annotations

import asyncio
import json
import uuid

import httpx
from playwright.async_api import Page, Route, expect

from tests.factories import DEFAULT_PASSWORD
from tests.web.conftest import World, api_login, screenshot, sign_in, submit_login


async def _member_with_a_turn(world: World) -> tuple[str, str]:
    """A new member of the tenant who asked one question; (e-mail, session id)."""
    email = f"member-{uuid.uuid4().hex[:8]}@example.com"
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
        admin = await api_login(client, world.admin_email)
        created = await client.post(
            "/admin/users", json={"email": email, "password": DEFAULT_PASSWORD}, headers=admin
        )
        assert created.status_code == 201, created.text
        headers = await api_login(client, email)
        chat = (await client.post("/sessions", json={}, headers=headers)).json()
        answer = await client.post(
            "/chat",
            json={"session_id": chat["id"], "message": "What is the refund policy?"},
            headers=headers,
        )
        assert answer.status_code == 200, answer.text
    return email, chat["id"]


async def test_a_member_sees_no_admin_pages_and_their_urls_are_refused(
    page: Page, world: World
) -> None:
    await sign_in(page, world, world.member_email)
    await expect(page.locator("#message")).to_be_visible()
    nav = page.locator("nav.top-nav")
    await expect(nav.locator("a")).to_have_count(2)  # Chat, My data
    await expect(nav).not_to_contain_text("Audit")
    for path in ("audit", "kb", "users"):
        await page.goto(f"{world.url}/#/admin/{path}")
        await expect(page.locator("h1")).to_have_text("Refused")
    await screenshot(page, "member-refused")
    async with httpx.AsyncClient(base_url=world.url) as client:
        headers = await api_login(client, world.member_email)
        assert (await client.get("/admin/audit/turns", headers=headers)).status_code == 403


async def test_export_downloads_json_with_the_turns(page: Page, world: World) -> None:
    email, session_id = await _member_with_a_turn(world)
    await sign_in(page, world, email)
    await expect(page.locator("#message")).to_be_visible()
    await page.goto(f"{world.url}/#/me")
    await expect(page.locator("h1")).to_have_text("My data")
    await screenshot(page, "my-data")
    async with page.expect_download() as download_info:
        await page.click("text=Download my data (JSON)")
    download = await download_info.value
    path = await download.path()
    exported = json.loads(path.read_text())
    assert exported["user"]["email"] == email
    assert [t["user_query"] for t in exported["turns"]] == ["What is the refund policy?"]
    assert exported["turns"][0]["session_id"] == session_id


async def test_erasure_logs_out_and_the_login_stops_working(page: Page, world: World) -> None:
    email, _ = await _member_with_a_turn(world)
    await sign_in(page, world, email)
    await expect(page.locator("#message")).to_be_visible()
    await page.goto(f"{world.url}/#/me")
    erase = page.locator("button", has_text="Erase my account")
    await expect(erase).to_be_disabled()
    await page.fill("#erase-confirm", "erase my account")
    await expect(erase).to_be_enabled()
    await erase.click()
    await expect(page.locator("form.login")).to_be_visible()
    await expect(page.locator("form.login")).to_contain_text("were erased")
    await page.fill("#email", email)
    await page.fill("#password", DEFAULT_PASSWORD)
    await page.click("form.login button[type=submit]")
    await expect(page.locator("form.login .error")).to_have_text("The e-mail or password is wrong.")
    await screenshot(page, "login-after-erasure")
    # The refresh cookie is gone too: a reload stays signed out.
    await page.reload()
    await expect(page.locator("form.login")).to_be_visible()


async def test_docs_and_redoc_render_with_no_request_leaving_the_machine(
    page: Page, world: World
) -> None:
    outside: list[str] = []

    async def only_local(route: Route) -> None:
        if route.request.url.startswith(world.url):
            await route.continue_()
        else:
            outside.append(route.request.url)
            await route.abort()

    await page.route("**/*", only_local)
    await page.goto(f"{world.url}/docs")
    await expect(page.locator(".swagger-ui .info .title")).to_contain_text("Threadline")
    await expect(page.locator(".opblock").first).to_be_visible()
    await screenshot(page, "docs")
    await page.goto(f"{world.url}/redoc")
    await expect(page.locator("h1").first).to_contain_text("Threadline", timeout=20_000)
    await screenshot(page, "redoc")
    assert outside == []


async def test_pages_carry_a_strict_csp_and_the_refresh_cookie_is_locked_down(
    world: World,
) -> None:
    async with httpx.AsyncClient(base_url=world.url) as client:
        page = await client.get("/")
        policy = page.headers["content-security-policy"]
        assert "script-src 'self';" in policy and "style-src 'self';" in policy
        assert "unsafe-inline" not in policy and "http" not in policy
        assert "frame-ancestors 'none'" in policy
        assert "<script>" not in page.text and "style=" not in page.text
        module = await client.get("/static/js/main.js")
        assert module.headers["cache-control"] == "no-cache"
        vendored = await client.get("/static/vendor/redoc-2.5.4/redoc.standalone.js")
        assert "immutable" in vendored.headers["cache-control"]
        docs = await client.get("/docs")
        assert "script-src 'self';" in docs.headers["content-security-policy"]
        assert "cdn" not in docs.text.lower() and "<script>" not in docs.text

        body = {"email": world.admin_email, "password": DEFAULT_PASSWORD}
        csrf = {"X-Threadline-CSRF": "1", "Origin": world.url}
        refused = await client.post("/web/auth/login", json=body)
        assert refused.status_code == 403, "no custom header: refused"
        cross = await client.post(
            "/web/auth/login", json=body, headers={**csrf, "Origin": "https://evil.example"}
        )
        assert cross.status_code == 403, "another origin: refused"
        login = await client.post("/web/auth/login", json=body, headers=csrf)
        assert login.status_code == 200
        assert "refresh_token" not in login.json()
        cookie = login.headers["set-cookie"]
        for attribute in ("HttpOnly", "SameSite=strict", "Path=/web/auth", "Secure"):
            assert attribute.lower() in cookie.lower(), cookie
        token = cookie.split(";", 1)[0].split("=", 1)[1]
    jar = {"Cookie": f"tl_refresh={token}"}
    async with httpx.AsyncClient(base_url=world.url) as browser:
        assert (await browser.post("/web/auth/refresh", headers=jar)).status_code == 403
        again = await browser.post("/web/auth/refresh", headers={**jar, **csrf})
        assert again.status_code == 200 and again.json()["access_token"]
        # Within the reuse window, the same cookie again is a second tab racing the first:
        # it gets the same new cookie (tests/auth/test_refresh_reuse.py: after it, a replay).
        raced = await browser.post("/web/auth/refresh", headers={**jar, **csrf})
        assert raced.status_code == 200
        assert raced.headers["set-cookie"] == again.headers["set-cookie"]


async def test_two_tabs_opened_at_once_ten_times_stay_signed_in(page: Page, world: World) -> None:
    """A restored browser session opens its tabs at the same moment: each presents the same
    refresh cookie. Ten times over, no tab is signed out and the login survives."""
    await sign_in(page, world, world.member_email)
    await expect(page.locator("#message")).to_be_visible()
    for attempt in range(10):
        tabs = [await page.context.new_page() for _ in range(2)]
        await asyncio.gather(*(tab.goto(world.url + "/") for tab in tabs))
        for tab in tabs:
            await expect(tab.locator("#message"), f"round {attempt}").to_be_visible()
            await expect(tab.locator("form.login")).to_have_count(0)
        for tab in tabs:
            await tab.close()
    await page.reload()
    await expect(page.locator("#message")).to_be_visible()


async def test_the_access_token_is_refreshed_silently_before_it_expires_and_logout_ends_it(
    page: Page, world: World
) -> None:
    refreshes: list[str] = []
    page.on(
        "request",
        lambda request: (
            refreshes.append(request.url) if "/web/auth/refresh" in request.url else None
        ),
    )
    await page.clock.install()
    await sign_in(page, world, world.member_email)
    await expect(page.locator("#message")).to_be_visible()
    refreshes.clear()
    # The access token lives 900 s: the page renews it a minute before, without a reload.
    await page.clock.fast_forward(841_000)
    for _ in range(50):
        if refreshes:
            break
        await page.wait_for_timeout(100)
    assert refreshes, "the page refreshed its access token"
    stored = await page.evaluate("JSON.stringify(localStorage) + JSON.stringify(sessionStorage)")
    assert stored == "{}{}", "no token in web storage"
    assert "token" not in page.url
    await page.click("text=Log out")
    await expect(page.locator("form.login")).to_be_visible()
    await page.reload()
    await expect(page.locator("form.login")).to_be_visible()


async def test_a_page_opened_just_after_signing_in_is_not_replaced_by_the_landing(
    page: Page, world: World
) -> None:
    """Signed in, the app looks up the latest conversation to open. A page opened before that
    answer came (a link followed at once) stays open: the landing replaced it, which a
    loaded machine showed as a browser test landing on #/new instead of the SSO page."""
    asked, release = asyncio.Event(), asyncio.Event()

    async def hold(route: Route) -> None:
        asked.set()
        await release.wait()
        await route.continue_()

    await page.route(lambda url: url.endswith("/sessions?limit=1"), hold)
    await submit_login(page, world, world.admin_email)
    await asyncio.wait_for(asked.wait(), 30)
    await page.evaluate("location.hash = '#/admin/sso'")
    await expect(page.locator("#s-name")).to_be_visible()
    async with page.expect_response(lambda r: r.url.endswith("/sessions?limit=1")):
        release.set()
    await page.wait_for_timeout(300)  # the landing ran just after its answer, when it did
    assert page.url.endswith("#/admin/sso")
    await expect(page.locator("#s-name")).to_be_visible()
