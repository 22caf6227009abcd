"""Security headers for every response, and the CSRF check of the cookie-authenticated
browser endpoints."""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.errors import Forbidden

# The web app's pages: nothing inline, nothing from another origin.
PAGE_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
# Swagger UI and ReDoc set style attributes and ReDoc starts a blob: worker; their scripts
# are still only this origin's files.
DOCS_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)
DOCS_PATHS = ("/docs", "/redoc")
CSRF_HEADER = "X-Threadline-CSRF"


class SecurityHeadersMiddleware:
    """Adds the Content-Security-Policy and its companions to every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        policy = DOCS_POLICY if path.startswith(DOCS_PATHS) else PAGE_POLICY

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.setdefault("Content-Security-Policy", policy)
                headers.setdefault("X-Content-Type-Options", "nosniff")
                headers.setdefault("Referrer-Policy", "no-referrer")
                headers.setdefault("X-Frame-Options", "DENY")
            await send(message)

        await self.app(scope, receive, send_with_headers)


def check_same_origin(request: Request) -> None:
    """Refuse (403) a cookie-authenticated request another site could have made.

    The custom header cannot be sent cross-origin without a CORS preflight, which this API
    never grants; the Origin (or Sec-Fetch-Site) must be this very origin as well.
    """
    if request.headers.get(CSRF_HEADER) != "1":
        raise Forbidden(f"The {CSRF_HEADER} header is required.", code="csrf_refused")
    origin = request.headers.get("origin")
    host = request.headers.get("host", "")
    if origin is not None:
        if origin not in (f"http://{host}", f"https://{host}"):
            raise Forbidden("Cross-origin request refused.", code="csrf_refused")
    elif request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        raise Forbidden("Cross-origin request refused.", code="csrf_refused")
