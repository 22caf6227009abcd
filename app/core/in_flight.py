"""At most so many requests in progress per credential: the rest are refused at the door.

Every authenticated request costs the event loop a few milliseconds (authentication reads
the user and what they may see; the route reads Redis), and one event loop serves everyone.
A member who opens 300 requests at once (issue 33: 300 resumes of one stream) queued every
other request behind that work: `/healthz` p95 1.1 s. A bound on the requests one credential
has in progress keeps one caller's burst to a few dozen requests' work; the rest get a 429
here, before authentication touches PostgreSQL or Redis (well under a millisecond each).

The key is the credential as sent (the bearer token, the API key, the session cookie),
never a claim read from it unverified: nobody can fill another caller's count without
holding their credential. A caller with no credential is not counted here (the login
throttle and the rate limits bound those routes)."""

from __future__ import annotations

from collections import Counter

from starlette.types import ASGIApp, Receive, Scope, Send

from app.core.errors import error_body
from app.core.middleware import send_json

_CREDENTIAL_HEADERS = (b"authorization", b"x-api-key", b"cookie")
MESSAGE = "Too many requests in progress with this credential; wait for some to finish."


class InFlightPerCredentialMiddleware:
    """429 `too_many_in_flight` past `limit` requests in progress per credential."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit
        self._in_flight: Counter[bytes] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        credential = _credential(scope) if self.limit and scope["type"] == "http" else None
        if credential is None:
            await self.app(scope, receive, send)
            return
        if self._in_flight[credential] >= self.limit:
            body = error_body("too_many_in_flight", MESSAGE)
            await send_json(send, 429, body, headers=[(b"retry-after", b"1")])
            return
        self._in_flight[credential] += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self._in_flight[credential] -= 1
            if self._in_flight[credential] <= 0:
                del self._in_flight[credential]

    def in_flight(self) -> int:
        """Requests counted now, all credentials together."""
        return sum(self._in_flight.values())


def _credential(scope: Scope) -> bytes | None:
    """The request's credential headers, as sent; None without one."""
    found = b"\0".join(
        value for name, value in scope["headers"] if name in _CREDENTIAL_HEADERS and value
    )
    return found or None
