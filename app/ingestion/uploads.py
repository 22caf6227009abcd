"""Reading an upload: size, type from content, content hash."""

from __future__ import annotations

import asyncio
import hashlib
import re
import unicodedata
from dataclasses import dataclass
from typing import TypedDict

from starlette.datastructures import UploadFile

from app.core.errors import PayloadTooLarge, UnprocessableEntity
from app.ingestion.extract import sniff

READ_CHUNK = 1024 * 1024


class NewDocumentColumns(TypedDict):
    """The columns a document or attachment made from an upload starts with."""

    filename: str | None
    content_type: str
    size_bytes: int
    content_hash: str
    source: bytes
    status: str


@dataclass(frozen=True)
class Upload:
    """An uploaded file read whole: its bytes, name, detected type and hash."""

    data: bytes
    filename: str | None
    content_type: str
    content_hash: str

    def new_document_columns(self) -> NewDocumentColumns:
        """The columns a document or attachment made from this upload starts with."""
        return {
            "filename": self.filename,
            "content_type": self.content_type,
            "size_bytes": len(self.data),
            "content_hash": self.content_hash,
            "source": self.data,
            "status": "pending",
        }


async def read_upload(file: UploadFile, max_bytes: int, max_chars: int | None = None) -> Upload:
    """The whole file, refused past `max_bytes` (413), typed by its content (415), a text
    file refused past `max_chars` characters (413 `document_too_long`)."""
    parts: list[bytes] = []
    size = 0
    while chunk := await file.read(READ_CHUNK):
        size += len(chunk)
        if size > max_bytes:
            raise PayloadTooLarge(f"The file exceeds the limit of {max_bytes} bytes.")
        parts.append(chunk)
    data = b"".join(parts)
    if not data:
        raise UnprocessableEntity("The file is empty.", code="empty_file")
    # Decoding and hashing 25 MB take tens of milliseconds: off the event loop.
    return await asyncio.to_thread(from_bytes, data, file.filename, max_chars)


def display_name(filename: str | None) -> str | None:
    """The name an upload is shown and cited by: its last path component, without control or
    formatting characters (a right-to-left override can make `exe.txt` read `txt.exe`), its
    whitespace collapsed, at most 255 characters; None when nothing is left. The name is
    never a path here, but it becomes a source's title in prompts, exports and the web app."""
    if not filename:
        return None
    base = re.split(r"[/\\]", filename)[-1]
    kept = "".join(
        " " if c.isspace() else c
        for c in base
        if c.isspace() or unicodedata.category(c) not in {"Cc", "Cf", "Cs"}
    )
    name = " ".join(kept.split())[:255]
    return name or None


def from_bytes(data: bytes, filename: str | None, max_chars: int | None = None) -> Upload:
    """An `Upload` from raw bytes: typed by content, refused when too long or unsupported."""
    sniffed = sniff(data, filename)
    if max_chars is not None and sniffed.chars is not None and sniffed.chars > max_chars:
        raise PayloadTooLarge(
            f"The text has {sniffed.chars} characters; the limit is {max_chars}.",
            code="document_too_long",
        )
    return Upload(
        data=data,
        filename=display_name(filename),
        content_type=sniffed.content_type,
        content_hash=hashlib.sha256(data).hexdigest(),
    )
