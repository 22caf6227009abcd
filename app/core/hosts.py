"""The Host header is checked, never trusted: a pure ASGI middleware that refuses hosts the
operator did not allow, makes redirects to the request's own URL relative, and sends HSTS.

Starlette builds absolute URLs from the request's Host (the trailing-slash redirect of
`GET /sessions/` was `307 Location: http://evil.example/sessions` for `Host: evil.example`):
so an unknown Host is refused (400 `invalid_host`), and a redirect to the request's own host
leaves as a path, which the client resolves against the URL it asked for: right behind a
TLS-terminating proxy too, where the app sees `http`. docs/adr/0051.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.errors import error_body

UNCHECKED_PATHS = ("/healthz", "/readyz")
"""Probes (a load balancer's, Kubernetes') ask by address, not by name; they build no URL."""


def host_name(host_header: str) -> str:
    """The host of a Host header value, without its port, lower case (`[::1]:8000` → `::1`)."""
    value = host_header.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def host_allowed(name: str, allowed: Iterable[str]) -> bool:
    """Whether `name` matches one of `allowed`: the name itself, `*.example.com` for its
    subdomains (not the domain itself), or `*` for any."""
    for pattern in allowed:
        pattern = pattern.strip().lower().strip("[]")
        if pattern == "*" or pattern == name:
            return True
        if pattern.startswith("*.") and name.endswith(pattern[1:]):
            return True
    return False


class HostMiddleware:
    """Refuse a Host not in `allowed_hosts`; relative redirects to the request's own host;
    `Strict-Transport-Security` on every response when `hsts_seconds` is set."""

    def __init__(
        self, app: ASGIApp, *, allowed_hosts: Iterable[str], hsts_seconds: int = 0
    ) -> None:
        self.app = app
        self.allowed = tuple(allowed_hosts)
        self.hsts = f"max-age={hsts_seconds}".encode() if hsts_seconds else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        sent = dict(scope["headers"]).get(b"host")
        # Without a Host header (HTTP/1.0, a raw ASGI call), URLs are built from the server's
        # own address: nothing a client chose, so nothing to refuse.
        checked = sent is not None and scope["path"] not in UNCHECKED_PATHS
        if checked and not host_allowed(host_name((sent or b"").decode("latin-1")), self.allowed):
            await self._refuse(scope, send)
            return
        host = sent.decode("latin-1") if sent is not None else _server_netloc(scope)

        async def send_checked(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = self._headers(message, host)
            await send(message)

        await self.app(scope, receive, send_checked)

    def _headers(self, start: Message, host: str) -> list[tuple[bytes, bytes]]:
        headers: list[tuple[bytes, bytes]] = list(start.get("headers", []))
        if 300 <= start["status"] < 400:
            headers = [
                (name, _relative(value, host) if name.lower() == b"location" else value)
                for name, value in headers
            ]
        if self.hsts is not None:
            headers.append((b"strict-transport-security", self.hsts))
        return headers

    async def _refuse(self, scope: Scope, send: Send) -> None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        message = "This host name is not served here (THREADLINE_ALLOWED_HOSTS)."
        body = json.dumps(error_body("invalid_host", message)).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        if self.hsts is not None:
            headers.append((b"strict-transport-security", self.hsts))
        await send({"type": "http.response.start", "status": 400, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _server_netloc(scope: Scope) -> str:
    server = scope.get("server")
    if not server:
        return ""
    name, port = server
    return str(name) if port in (None, 80, 443) else f"{name}:{port}"


def _relative(location: bytes, host: str) -> bytes:
    """An absolute `location` on the request's own host as path and query; others as they are."""
    url = urlsplit(location.decode("latin-1"))
    if not url.scheme or url.netloc.lower() != host.strip().lower():
        return location
    # One leading slash: `//evil.example/x` would be a network path to another host.
    path = "/" + url.path.lstrip("/\\")
    return (path + (f"?{url.query}" if url.query else "")).encode("latin-1")
