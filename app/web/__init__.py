"""The browser app: static pages served by the API itself (docs/adr/0033-web-app-technology.md).

`install_web(app)` adds the page routes, the cookie-based browser login (`/web/auth/*`),
the vendored Swagger UI and ReDoc, and the security headers on every response.
"""

from __future__ import annotations

from fastapi import FastAPI

from app.web.assets import STATIC_DIR, Assets
from app.web.auth import router as auth_router
from app.web.pages import router as pages_router
from app.web.security import SecurityHeadersMiddleware


def install_web(app: FastAPI) -> None:
    """Serve the web app, /docs and /redoc from this process, every asset local."""
    app.include_router(auth_router)
    app.include_router(pages_router)
    app.mount("/assets", Assets(directory=STATIC_DIR, versioned=True), name="assets")
    app.mount("/static", Assets(directory=STATIC_DIR), name="static")
    app.add_middleware(SecurityHeadersMiddleware)
