"""The web app's files on the wire: compressed once, cached for good under versioned URLs.

- **Versioned URLs.** `BUILD` is a digest of every file under `static/`; the shell at `/`
  loads the app from `/assets/<BUILD>/…`, where every file is `immutable` for a year. The
  modules import each other by relative paths, so the whole graph stays under one build and a
  deploy (a new digest) never mixes old and new modules. A page still holding an older build
  gets today's files under its old URL, revalidated (`no-cache`), never cached for good.
- **Compressed once.** A text file (JS, CSS, HTML, JSON, SVG, Markdown) is gzip'd the first
  time a client that accepts gzip asks for it, and the bytes are kept, keyed by the file's
  path, size and mtime; other responses of the API are compressed per request by Starlette's
  `GZipMiddleware` (app/main.py), which leaves these, and event streams, alone.
"""

from __future__ import annotations

import gzip
import hashlib
import os
from pathlib import Path

import anyio
import anyio.to_thread
from starlette.datastructures import Headers
from starlette.responses import FileResponse, Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

STATIC_DIR = Path(__file__).parent / "static"
COMPRESSIBLE = {".js", ".css", ".html", ".json", ".svg", ".md", ".txt", ".map"}
IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"
_MIN_SIZE = 256

_packed: dict[tuple[str, int, int], bytes] = {}


def build_id(directory: Path = STATIC_DIR) -> str:
    """A digest of every file under `directory` (names and contents): the assets' version."""
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        digest.update(path.relative_to(directory).as_posix().encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:12]


BUILD = build_id()


def packed(key: tuple[str, int, int], data: bytes) -> bytes:
    """`data` gzip'd, computed once per key (a file's path, size and mtime)."""
    body = _packed.get(key)
    if body is None:
        body = _packed[key] = gzip.compress(data, compresslevel=9, mtime=0)
    return body


def accepts_gzip(scope: Scope) -> bool:
    """Whether the request's Accept-Encoding allows gzip."""
    accepted = Headers(scope=scope).get("accept-encoding", "")
    return any(
        part.split(";")[0].strip() == "gzip" and "q=0" not in part.replace(" ", "").split(";")[1:]
        for part in accepted.split(",")
    )


def gzip_response(response: Response, body: bytes) -> Response:
    """`response` (its status and headers) carrying `body`, gzip'd."""
    headers = {k: v for k, v in response.headers.items() if k.lower() != "content-length"}
    headers["Content-Encoding"] = "gzip"
    headers["Vary"] = "Accept-Encoding"
    return Response(body, status_code=response.status_code, headers=headers)


class Assets(StaticFiles):
    """Static files, each text file gzip'd once. `versioned`: the first path segment is a
    build id, and the current build's files are cached for good; otherwise the vendored
    bundles (whose directories carry their version) are, and the app's own files are
    revalidated on every load."""

    def __init__(self, *, directory: Path, versioned: bool = False) -> None:
        super().__init__(directory=directory)
        self.versioned = versioned

    def get_path(self, scope: Scope) -> str:
        """The file's path under the directory (without the build id when versioned)."""
        path = super().get_path(scope)
        if self.versioned:
            path = path.partition(os.sep)[2]
        return path

    async def get_response(self, path: str, scope: Scope) -> Response:
        """The file, compressed when it is text and the client accepts gzip, with the cache
        policy of its kind."""
        response = await super().get_response(path, scope)
        if self.versioned:
            current = super().get_path(scope).partition(os.sep)[0] == BUILD
            immutable = current and response.status_code in (200, 304)
        else:
            immutable = path.startswith("vendor" + os.sep) and response.status_code in (200, 304)
        if (
            isinstance(response, FileResponse)
            and response.status_code == 200
            and response.stat_result is not None
            and Path(path).suffix in COMPRESSIBLE
            and response.stat_result.st_size >= _MIN_SIZE
        ):
            response.headers["Vary"] = "Accept-Encoding"
            if accepts_gzip(scope):
                stat = response.stat_result
                key = (str(response.path), stat.st_size, stat.st_mtime_ns)
                body = _packed.get(key)
                if body is None:  # the first time only: read and compress off the event loop
                    data = await anyio.Path(response.path).read_bytes()
                    body = await anyio.to_thread.run_sync(packed, key, data)
                response = gzip_response(response, body)
        response.headers["Cache-Control"] = IMMUTABLE if immutable else REVALIDATE
        return response
