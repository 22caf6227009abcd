"""What a browser does during a single sign-on, step by step, against the app (in process)
and a real provider (over loopback HTTP)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx

from app.models import Tenant
from tests.factories import LoggedIn
from tests.sso.provider import CLIENT_ID, CLIENT_SECRET, REDIRECT_URI, OpenIdProvider

APP_ORIGIN = "http://threadline.test"
SAME_ORIGIN = {"X-Threadline-CSRF": "1", "Origin": APP_ORIGIN}
MAX_REDIRECTS = 10


def query(url: str) -> dict[str, str]:
    """The query parameters of a URL (the last value of each)."""
    return {k: v[-1] for k, v in parse_qs(urlsplit(url).query).items()}


async def configure(
    client: httpx.AsyncClient,
    admin: LoggedIn,
    op: OpenIdProvider,
    *,
    client_id: str = CLIENT_ID,
    client_secret: str = CLIENT_SECRET,
    **overrides: Any,
) -> httpx.Response:
    """The tenant admin sets the provider through the admin API."""
    body: dict[str, Any] = {
        "display_name": "Example ID",
        "issuer": op.issuer,
        "client_id": client_id,
        "client_secret": client_secret,
        "allowed_domains": ["example.com"],
        "scopes": "openid email profile groups",
        "groups_claim": "groups",
    }
    body.update(overrides)
    response = await client.put("/admin/sso", json=body, headers=admin.headers)
    assert response.status_code == 200, response.text
    return response


async def start(client: httpx.AsyncClient, tenant: Tenant, email: str) -> str:
    """The sign-in page's button: the provider's authorization URL the app redirects to."""
    options = await client.get("/sso/options", params={"tenant": tenant.name})
    assert options.status_code == 200, options.text
    (option,) = options.json()["sso"]
    started = await client.get(option["login_url"], params={"login_hint": email})
    assert started.status_code == 303, started.text
    return started.headers["location"]


async def at_provider(authorization_url: str) -> str:
    """Follow the provider's pages (a real HTTP client with its own cookies) until it sends
    the browser back to Threadline; that callback URL."""
    async with httpx.AsyncClient() as browser:
        url = authorization_url
        for _ in range(MAX_REDIRECTS):
            response = await browser.get(url)
            location = response.headers.get("location")
            assert response.status_code in (302, 303), (response.status_code, response.text)
            assert location is not None
            url = str(urljoin(url, location))
            if url.startswith(APP_ORIGIN + "/"):
                return url
    raise AssertionError("the provider never redirected back")


async def callback(client: httpx.AsyncClient, url: str) -> httpx.Response:
    """The browser arrives at the callback (with its binding cookie)."""
    return await client.get(url.removeprefix(APP_ORIGIN))


async def sign_in(client: httpx.AsyncClient, tenant: Tenant, email: str) -> httpx.Response:
    """The whole flow: button → provider → callback. The callback's response."""
    return await callback(client, await at_provider(await start(client, tenant, email)))


async def access_token(client: httpx.AsyncClient) -> str:
    """What the web app does on load: its refresh cookie for an access token."""
    refreshed = await client.post("/web/auth/refresh", headers=SAME_ORIGIN)
    assert refreshed.status_code == 200, refreshed.text
    token: str = refreshed.json()["access_token"]
    return token


def refusal(response: httpx.Response) -> str | None:
    """The reason a refused callback sent the browser back to the sign-in page with."""
    assert response.status_code == 303, response.text
    return query(response.headers["location"]).get("sso_error")


@dataclass
class IssuedToken:
    id_token: str
    nonce: str


async def token_from(
    op: OpenIdProvider, email: str, client_id: str, client_secret: str
) -> IssuedToken:
    """An ID token the provider issues to `client_id` through the code flow, the test acting
    as that client (to present the token where it does not belong)."""
    nonce = uuid.uuid4().hex
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT_URI,
        "scope": "openid email groups",
        "state": "s",
        "nonce": nonce,
        "login_hint": email,
        "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
        "code_challenge_method": "S256",
    }
    url = op.issuer + "/auth?" + httpx.QueryParams(params).__str__()
    code = query(await at_provider(url))["code"]
    async with httpx.AsyncClient() as http:
        answer = await http.post(
            op.issuer + "/token",
            data={
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": REDIRECT_URI,
                "code_verifier": "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk",
            },
            auth=(client_id, client_secret),
        )
    assert answer.status_code == 200, answer.text
    return IssuedToken(answer.json()["id_token"], nonce)
