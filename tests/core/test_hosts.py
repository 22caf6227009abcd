"""The Host header is checked, not trusted: an unknown host is refused instead of being
echoed into a redirect; redirects to the request's own host are relative; HSTS is sent
outside development (docs/adr/0051)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.core.hosts import _relative, host_allowed, host_name
from app.main import create_app
from tests.factories import login, make_tenant, make_user


async def test_a_trailing_slash_redirect_never_goes_to_the_host_a_client_sent(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    owner = await login(client, await make_user(db, await make_tenant(db)))

    forged = await client.get("/sessions/", headers={**owner.headers, "Host": "evil.example"})

    assert forged.status_code == 400, forged.headers.get("location")
    assert forged.json()["error"]["code"] == "invalid_host"
    assert "location" not in forged.headers
    assert forged.headers["x-request-id"]

    own = await client.get("/sessions/", headers=owner.headers)
    assert own.status_code == 307
    assert own.headers["location"] == "/sessions"  # relative: no Host, no scheme in it
    followed = await client.get(own.headers["location"], headers=owner.headers)
    assert followed.status_code == 200


async def test_probes_answer_whatever_host_they_ask_by(client: httpx.AsyncClient) -> None:
    response = await client.get("/healthz", headers={"Host": "10.1.2.3:8000"})
    assert response.status_code == 200


async def test_hsts_is_sent_outside_development(client: httpx.AsyncClient) -> None:
    response = await client.get("/healthz")
    assert response.headers["strict-transport-security"] == "max-age=31536000"
    refused = await client.get("/me", headers={"Host": "evil.example"})
    assert refused.headers["strict-transport-security"] == "max-age=31536000"


@pytest.fixture
async def development(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app: FastAPI = create_app(settings.model_copy(update={"env": "development"}))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost:8000") as c:
        yield c


async def test_development_sends_no_hsts_and_serves_localhost_by_default(
    development: httpx.AsyncClient,
) -> None:
    response = await development.get("/healthz")
    assert "strict-transport-security" not in response.headers
    assert Settings().allowed_hosts == ["localhost", "127.0.0.1", "::1"]
    assert Settings(allowed_hosts="a.example, *.b.example").allowed_hosts == [
        "a.example",
        "*.b.example",
    ]


@pytest.mark.parametrize(
    ("header", "allowed"),
    [
        ("localhost:8000", True),
        ("LOCALHOST", True),
        ("[::1]:8000", True),
        ("127.0.0.1", True),
        ("chat.example.com", True),
        ("example.com", False),
        ("evil.example", False),
        ("localhost.evil.example", False),
        ("evilexample.com", False),
        ("", False),
    ],
)
def test_host_names_match_exactly_or_as_subdomains(header: str, allowed: bool) -> None:
    patterns = ["localhost", "127.0.0.1", "::1", "*.example.com"]
    assert host_allowed(host_name(header), patterns) is allowed


@pytest.mark.parametrize(
    ("location", "relative"),
    [
        (b"http://h.test/sessions", b"/sessions"),
        (b"http://h.test/sessions?a=1", b"/sessions?a=1"),
        (b"http://h.test//evil.example/x", b"/evil.example/x"),
        (b"http://h.test/\\evil.example/x", b"/evil.example/x"),
        (b"https://elsewhere.example/x", b"https://elsewhere.example/x"),
        (b"/already/relative", b"/already/relative"),
    ],
)
def test_a_redirect_to_the_own_host_becomes_a_path_never_a_network_path(
    location: bytes, relative: bytes
) -> None:
    assert _relative(location, "h.test") == relative


async def test_a_request_without_a_host_header_is_served(app: FastAPI) -> None:
    """HTTP/1.0 or a raw ASGI call: URLs come from the server's own address then."""
    sent: list[dict[str, object]] = []

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.0",
        "method": "GET",
        "scheme": "http",
        "path": "/sessions/",
        "raw_path": b"/sessions/",
        "query_string": b"",
        "root_path": "",
        "headers": [],
        "client": ("127.0.0.1", 1),
        "server": ("10.0.0.5", 8000),
    }
    await app(scope, receive, send)  # type: ignore[arg-type]
    start = sent[0]
    assert start["status"] == 307
    assert dict(start["headers"])[b"location"] == b"/sessions"  # type: ignore[call-overload]
