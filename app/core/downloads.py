"""The stored original of an upload, served so that it can never run in the app's origin.

An uploaded HTML or SVG file is the user's bytes: opened from this origin it could read
the session's tokens. So every file goes out as a download (`Content-Disposition:
attachment`), the browser may not guess another type (`nosniff`), and the response's own
content security policy sandboxes it (a unique origin, no scripts, nothing loaded). A PDF
alone opens inline, so a citation can open it at its page (`#page=N`): browsers render it
with their own viewer, which the sandbox does not let run the document's scripts either.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple
from urllib.parse import quote

from fastapi import Response

PDF = "application/pdf"
SANDBOX_POLICY = "sandbox; default-src 'none'"
ORIGINAL_FILE: dict[str, Any] = {
    "description": "The stored bytes, as uploaded",
    "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
}
"""The OpenAPI description of a file endpoint's answer (any type the upload had)."""
_UNSAFE_IN_A_QUOTED_NAME = re.compile(r'[^\x20-\x7e]|["\\]')


class StoredFile(NamedTuple):
    """An upload's original bytes, its file name and its detected content type."""

    data: bytes
    filename: str
    content_type: str | None


def file_response(stored: StoredFile) -> Response:
    """The bytes with download headers: inline only for a PDF, sandboxed always.
    (`X-Content-Type-Options: nosniff` is on every response already, `app.core.middleware`.)"""
    data, filename = stored.data, stored.filename
    media_type = (stored.content_type or "application/octet-stream").split(";")[0].strip().lower()
    disposition = "inline" if media_type == PDF else "attachment"
    # An ASCII fallback for old clients, and the exact name in RFC 5987 form.
    fallback = _UNSAFE_IN_A_QUOTED_NAME.sub("_", filename) or "download"
    return Response(
        content=data,
        media_type=media_type,
        headers={
            "Content-Disposition": (
                f"{disposition}; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename)}"
            ),
            "Content-Security-Policy": SANDBOX_POLICY,
            "Cache-Control": "private, no-store",
        },
    )
