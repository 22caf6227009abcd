"""Pure ASGI middleware: request id + access log, the client's address behind trusted proxies,
and the request body size limit.

Pure ASGI (not BaseHTTPMiddleware) so streaming responses are passed through untouched.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Iterable
from ipaddress import ip_address, ip_network

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.errors import error_body
from app.core.request_context import reset_request_id, set_request_id

logger = logging.getLogger("threadline.access")

_VALID_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


class RequestContextMiddleware:
    """Give each request an id (the caller's `X-Request-ID` if sane), echo it, log the request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = dict(scope["headers"]).get(b"x-request-id", b"").decode("latin-1")
        request_id = incoming if _VALID_REQUEST_ID.match(incoming) else uuid.uuid4().hex
        token = set_request_id(request_id)
        started_at = time.perf_counter()
        status = 500
        started = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, started
            if message["type"] == "http.response.start":
                status, started = message["status"], True
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", request_id.encode()))
                # Browsers must not guess a type: an uploaded text rendered as HTML is XSS.
                headers.append((b"x-content-type-options", b"nosniff"))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            # Here rather than in Starlette's outermost handler, so the answer still carries
            # the request id. Nothing of the exception reaches the client.
            logger.exception("unhandled error", extra={"path": scope["path"]})
            if not started:
                body = error_body("internal_error", "Internal server error.")
                await send_json(send_with_id, 500, body)
        finally:
            logger.info(
                "request",
                extra={
                    "method": scope["method"],
                    "path": scope["path"],
                    "status": status,
                    "duration_ms": round((time.perf_counter() - started_at) * 1000, 2),
                },
            )
            reset_request_id(token)


class ClientAddressMiddleware:
    """The client's address is the peer's, unless the peer is one of `trusted_proxies`: then
    it is the right-most `X-Forwarded-For` entry that is not itself a trusted proxy.

    Anyone can send the header, so it is believed only from the proxies the operator named
    (none by default). The login throttle counts failures per client on the result.
    """

    def __init__(self, app: ASGIApp, *, trusted_proxies: Iterable[str] = ()) -> None:
        self.app = app
        self.trusted = tuple(ip_network(entry, strict=False) for entry in trusted_proxies)

    def _is_trusted(self, address: str) -> bool:
        try:
            parsed = ip_address(address.strip("[]"))
        except ValueError:
            return False
        return any(parsed in network for network in self.trusted)

    def forwarded_client(self, peer: str, forwarded_for: list[str]) -> str:
        """The client a chain of trusted proxies, ending at `peer`, reports."""
        client = peer
        hops = [hop.strip() for value in forwarded_for for hop in value.split(",")]
        for hop in reversed(hops):
            if not self._is_trusted(client):
                break
            try:
                client = str(ip_address(hop.strip("[]")))
            except ValueError:
                break  # garbage from the far side of the last proxy: stop at that proxy
        return client

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        peer = scope.get("client")
        if scope["type"] in ("http", "websocket") and self.trusted and peer:
            forwarded = [
                value.decode("latin-1")
                for name, value in scope["headers"]
                if name == b"x-forwarded-for"
            ]
            if forwarded and self._is_trusted(peer[0]):
                client = self.forwarded_client(peer[0], forwarded)
                if client != peer[0]:
                    scope = {**scope, "client": (client, 0)}
        await self.app(scope, receive, send)


def _too_large(limit: int) -> str:
    return f"The request body exceeds the limit of {limit} bytes."


MULTIPART_ENVELOPE_BYTES = 64 * 1024
"""What a multipart upload may carry besides its file: the boundaries, each part's headers
(the file's name among them) and the form's other fields (a document's title, external id,
metadata). Generous for any of them, and a bound (docs/adr/0045)."""


class BodySizeLimitMiddleware:
    """Refuse bodies over the limit with 413, by Content-Length or while streaming them in.

    `overrides` gives path prefixes (file uploads) the limit of the file they carry: a
    multipart body there may be `MULTIPART_ENVELOPE_BYTES` larger, for the form around the
    file, and the endpoint holds the file itself to the limit (app/ingestion/uploads.py), so
    a file of exactly the limit is accepted whatever its name. Kept instead of FastAPI's own
    `max_body_size`, which answers some refusals in plain text (docs/adr/0023).
    """

    def __init__(
        self, app: ASGIApp, *, max_bytes: int, overrides: Iterable[tuple[str, int]] = ()
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.overrides = tuple(overrides)

    def _limit(self, path: str, content_type: bytes) -> int:
        for prefix, limit in self.overrides:
            if path.startswith(prefix):
                if content_type.lower().startswith(b"multipart/form-data"):
                    return limit + MULTIPART_ENVELOPE_BYTES
                return limit
        return self.max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        limit = self._limit(scope["path"], headers.get(b"content-type", b""))
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await self._reject(send, limit)
            return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    # Rendered by the error handlers like any other HTTP error.
                    raise HTTPException(413, detail=_too_large(limit))
            return message

        await self.app(scope, limited_receive, send)

    @staticmethod
    async def _reject(send: Send, limit: int) -> None:
        await send_json(send, 413, error_body("payload_too_large", _too_large(limit)))


async def send_json(
    send: Send,
    status: int,
    payload: dict[str, object],
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    """A whole JSON response, sent by a middleware (before the app's error handlers)."""
    body = json.dumps(payload).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *(headers or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


_ACCEPTED_BODIES = (
    b"application/json",
    b"application/x-www-form-urlencoded",
    b"multipart/form-data",
)


class ContentTypeMiddleware:
    """415 for a request body of a type no endpoint reads (JSON, forms and uploads only)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in ("POST", "PUT", "PATCH"):
            headers = dict(scope["headers"])
            has_body = headers.get(b"content-length", b"0") not in (b"0", b"") or (
                b"transfer-encoding" in headers
            )
            media_type = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
            json_like = media_type.startswith(b"application/") and media_type.endswith(b"+json")
            if has_body and not json_like and media_type not in _ACCEPTED_BODIES:
                shown = media_type.decode("latin-1") or "none"
                await send_json(
                    send,
                    415,
                    error_body(
                        "unsupported_media_type",
                        f"Content-Type {shown!r} is not accepted: send application/json.",
                    ),
                )
                return
        await self.app(scope, receive, send)
