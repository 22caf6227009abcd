"""The pages: the web app's one HTML shell at `/`, and `/docs` and `/redoc` rebuilt on the
vendored Swagger UI and ReDoc, with no inline script and nothing from another origin."""

from __future__ import annotations

from functools import lru_cache

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from starlette.responses import Response

from app.web.assets import BUILD, REVALIDATE, STATIC_DIR, accepts_gzip, packed

SWAGGER = "/static/vendor/swagger-ui-5.35.0"
REDOC = "/static/vendor/redoc-2.5.4"
_NO_CACHE = {"Cache-Control": REVALIDATE}

router = APIRouter(include_in_schema=False)


@lru_cache(maxsize=1)
def _shell() -> tuple[bytes, bytes]:
    """The app's one HTML page, loading this build's assets, plain and gzip'd (both once)."""
    html = (STATIC_DIR / "index.html").read_text().replace('"/static/', f'"/assets/{BUILD}/')
    body = html.encode()
    return body, packed(("index.html", len(body), 0), body)


@router.get("/")
async def index(request: Request) -> Response:
    """The web app (its routes live after `#`, so this is its only page)."""
    plain, gzipped = _shell()
    headers = {**_NO_CACHE, "ETag": f'"{BUILD}"', "Vary": "Accept-Encoding"}
    if request.headers.get("if-none-match") == f'"{BUILD}"':
        return Response(status_code=304, headers=headers)
    if accepts_gzip(request.scope):
        return Response(
            gzipped, media_type="text/html", headers={**headers, "Content-Encoding": "gzip"}
        )
    return Response(plain, media_type="text/html", headers=headers)


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
