"""Errors under /v1 in OpenAI's shape, so OpenAI clients raise the right exception.

The rest of the API answers `{"error": {"code", "message"}}`; under /v1 the same error leaves
as `{"error": {"message", "type", "param", "code"}}`, rewritten on its way out by this
middleware. Rewriting the finished response (rather than teaching every handler a second
shape) covers every source of an error alike: the handlers, the body-size and content-type
middleware, an unknown path, the 500 of an unexpected failure. A 422 becomes a 400, which is
what OpenAI answers to an invalid request (the SDK's `BadRequestError`). Successful responses
and streams pass through untouched.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

PREFIX = "/v1"

_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    429: "rate_limit_error",
}


def error_type(status: int) -> str:
    """OpenAI's error `type` for an HTTP status."""
    if status >= 500:
        return "server_error"
    return _TYPES.get(status, "invalid_request_error")


def openai_error(status: int, code: str | None, message: str, param: str | None = None) -> bytes:
    """An error body in OpenAI's shape."""
    detail = {"message": message, "type": error_type(status), "param": param, "code": code}
    return json.dumps({"error": detail}, separators=(",", ":")).encode()


def _param(error: dict[str, Any]) -> str | None:
    """The request field a validation error is about: its first `loc`, without `body`."""
    details = error.get("details") or []
    if not details:
        return None
    # Without pydantic's union tags (`constrained-str`, `list[TextPart]`): the field's path.
    loc = [
        str(part)
        for part in details[0].get("loc", [])
        if part != "body" and not any(c in str(part) for c in "-[")
    ]
    return ".".join(loc) or None


def rewrite(status: int, body: bytes) -> tuple[int, bytes]:
    """The error response `status`/`body` as OpenAI clients expect it."""
    try:
        error = json.loads(body)["error"]
        code, message = error.get("code"), str(error["message"])
    except (ValueError, KeyError, TypeError):
        return status, openai_error(status, None, body.decode("utf-8", "replace") or "Error")
    status = 400 if status == 422 else status
    return status, openai_error(status, code, message, _param(error))


class OpenAIErrorMiddleware:
    """Rewrites error responses under /v1 into OpenAI's error shape."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not (path == PREFIX or path.startswith(PREFIX + "/")):
            await self.app(scope, receive, send)
            return
        held: Message | None = None  # an error's start, sent once its body is rewritten
        chunks: list[bytes] = []

        async def send_rewritten(message: Message) -> None:
            nonlocal held
            if message["type"] == "http.response.start" and message["status"] >= 400:
                held = message
                return
            if held is None or message["type"] != "http.response.body":
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            status, body = rewrite(held["status"], b"".join(chunks))
            headers = [
                (k, v)
                for k, v in held.get("headers", [])
                if k.lower() not in (b"content-length", b"content-type")
            ]
            headers += [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ]
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, send_rewritten)
