"""What a file is, judged by its content, never by its name.

Binary containers by their magic bytes and the parts they hold (a DOCX is a zip with
`word/document.xml`, an EPUB one whose `mimetype` says so); text by what it reads as:
an e-mail's header block, JSON that parses, an HTML document's opening tags, rows of a
delimited table, Markdown's marks; plain text otherwise. Anything else is a 415.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from app.core.errors import UnsupportedMediaType
from app.ingestion.formats import archive, delimited
from app.ingestion.formats.base import CONTROL
from app.ingestion.formats.types import (
    ACCEPTED,
    CSV,
    DOCX,
    EML,
    EPUB,
    HTML,
    JSON,
    MARKDOWN,
    ODT,
    PDF,
    PPTX,
    TEXT,
    XLSX,
)

_MARKDOWN_HINTS = re.compile(r"^(#{1,6} |\s*[-*+] |\s*\d+\. |```|>\s)", re.MULTILINE)
_HTML_START = re.compile(
    r"^\s*(?:<\?xml[^>]*>\s*)?(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html|head|body)\b",
    re.IGNORECASE | re.DOTALL,
)
_HEADER = re.compile(r"^([A-Za-z][A-Za-z0-9-]*):[ \t]*\S?")
_MAIL_HEADERS = {"from", "to", "subject", "date", "message-id", "mime-version", "received"}
_OLE2 = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


@dataclass(frozen=True)
class Sniffed:
    """The content type a file was recognised as, and a text file's length."""

    content_type: str
    chars: int | None = None
    """The length of a text file's text; None for a binary format (known once extracted)."""


def _refuse(why: str) -> UnsupportedMediaType:
    return UnsupportedMediaType(f"{why} Accepted: {ACCEPTED}.", code="unsupported_file_type")


def sniff(data: bytes, filename: str | None = None) -> Sniffed:
    """The file's type from its bytes; `filename` only tells Markdown from plain text, as
    both are the same bytes. Anything unrecognised is refused (415, naming what is accepted)."""
    if data.startswith(b"%PDF-"):
        return Sniffed(PDF)
    if data.startswith(_OLE2):
        raise _refuse(
            "Legacy binary Office files (.doc, .xls, .ppt) are not read: save as the newer format."
        )
    members = archive.names(data)
    if members is not None:
        return Sniffed(_container(data, members))
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _refuse("The file is neither text (UTF-8) nor a format Threadline reads.") from exc
    if CONTROL.search(text, 0, 65536):
        raise _refuse("The file is binary and not a format Threadline reads.")
    return Sniffed(_text_type(text, filename), len(text))


def _container(data: bytes, members: set[str]) -> str:
    if "mimetype" in members:
        declared = archive.first_member(data, "mimetype").strip()
        if declared == b"application/epub+zip":
            return EPUB
        if declared == b"application/vnd.oasis.opendocument.text":
            return ODT
    if "[Content_Types].xml" in members:
        if "word/document.xml" in members:
            return DOCX
        if "ppt/presentation.xml" in members:
            return PPTX
        if "xl/workbook.xml" in members:
            return XLSX
    raise _refuse("The file is a zip archive of no format Threadline reads.")


def _text_type(text: str, filename: str | None) -> str:
    head = text[:20000]
    if _is_mail(head):
        return EML
    stripped = head.lstrip()
    if stripped[:1] in ("{", "[") and _is_json(text):
        return JSON
    if _HTML_START.match(head):
        return HTML
    named_md = bool(filename and filename.lower().endswith((".md", ".markdown")))
    if named_md or _MARKDOWN_HINTS.search(head):
        return MARKDOWN
    if delimited.dialect(head) is not None:
        return CSV
    return TEXT


def _is_mail(head: str) -> bool:
    """A header block (`Name: value` lines, folded lines indented) ended by a blank line,
    naming at least two of the headers every message has."""
    names: set[str] = set()
    for line in head.splitlines()[:200]:
        if not line.strip():
            return len(names & _MAIL_HEADERS) >= 2
        if line[:1] in (" ", "\t") and names:
            continue
        found = _HEADER.match(line)
        if not found:
            return False
        names.add(found.group(1).lower())
    return False


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True
