"""The MCP endpoint's door: a Threadline API key (as the bearer token or `X-API-Key`) is
resolved to its principal before the MCP SDK sees the request; the principal rides on the
request's state, where the tools read it. Anything else is a 401 in the API's error shape."""

from __future__ import annotations

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from app.auth.principal import API_KEY_PREFIX, Principal, authenticate
from app.core.errors import AppError, Unauthorized, error_response


def _api_key(request: Request) -> str | None:
    key = request.headers.get("x-api-key")
    if key:
        return key
    scheme, _, credential = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and credential.strip().startswith(API_KEY_PREFIX):
        return credential.strip()
    return None


def principal_of(request: Request) -> Principal:
    """The caller this endpoint's door let in."""
    principal: Principal = request.state.principal
    return principal


class ApiKeyGate:
    """Authenticates each request to the wrapped MCP app with an API key."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope)
        try:
            key = _api_key(request)
            if key is None:
                raise Unauthorized(
                    "The MCP server takes a Threadline API key: "
                    "`Authorization: Bearer tl_…` or `X-API-Key`.",
                    code="api_key_required",
                )
            resources = request.app.state.resources
            async with resources.sessionmaker() as db:
                # Sets request.state.principal; the read-only transaction ends here.
                await authenticate(request, db, resources.settings, None, key)
                await db.rollback()
        except AppError as exc:
            failed = error_response(exc.status_code, exc.code, exc.message, exc.headers)
            await failed(scope, receive, send)
            return
        await self.app(scope, receive, send)
