"""The pages: the web app's one HTML shell at `/`, and `/docs` and `/redoc` rebuilt on the
vendored Swagger UI and ReDoc, with no inline script and nothing from another origin."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.staticfiles import StaticFiles
from starlette.responses import Response
from starlette.types import Scope

STATIC_DIR = Path(__file__).parent / "static"
SWAGGER = "/static/vendor/swagger-ui-5.35.0"
REDOC = "/static/vendor/redoc-2.5.4"
_NO_CACHE = {"Cache-Control": "no-cache"}

router = APIRouter(include_in_schema=False)


class Assets(StaticFiles):
    """`/static`: the app's own modules are revalidated on every load (a deploy never mixes
    old and new modules); the vendored bundles, whose directories carry their version, are
    cached for good."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        """The file, with the cache policy of its kind."""
        response = await super().get_response(path, scope)
        immutable = path.startswith("vendor/") and response.status_code == 200
        response.headers["Cache-Control"] = (
            "public, max-age=31536000, immutable" if immutable else "no-cache"
        )
        return response


@router.get("/")
async def index() -> FileResponse:
    """The web app (its routes live after `#`, so this is its only page)."""
    return FileResponse(STATIC_DIR / "index.html", headers=_NO_CACHE)


def _docs_page(title: str, head: str, body: str) -> HTMLResponse:
    html = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{title}</title><link rel="stylesheet" href="/static/docs.css">{head}'
        f"</head><body>{body}</body></html>"
    )
    return HTMLResponse(html, headers=_NO_CACHE)


@router.get("/docs")
async def swagger_ui() -> HTMLResponse:
    """Swagger UI for /openapi.json, served from this process."""
    return _docs_page(
        "Threadline API — Swagger UI",
        f'<link rel="stylesheet" href="{SWAGGER}/swagger-ui.css">',
        f'<div id="swagger-ui"></div><script src="{SWAGGER}/swagger-ui-bundle.js"></script>'
        '<script src="/static/docs-init.js"></script>',
    )


@router.get("/redoc")
async def redoc() -> HTMLResponse:
    """ReDoc for /openapi.json, served from this process."""
    return _docs_page(
        "Threadline API — ReDoc",
        "",
        f'<div id="redoc"></div><script src="{REDOC}/redoc.standalone.js"></script>'
        '<script src="/static/redoc-init.js"></script>',
    )
