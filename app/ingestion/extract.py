"""What a file is, judged by its content (not its name), and its text."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass

from app.core.errors import UnsupportedMediaType

PDF = "application/pdf"
MARKDOWN = "text/markdown"
TEXT = "text/plain"
# Control characters other than tab, newline, form feed and carriage return: binary data.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f]")
_MARKDOWN_HINTS = re.compile(r"^(#{1,6} |\s*[-*+] |\s*\d+\. |```|>\s)", re.MULTILINE)


class ExtractionError(Exception):
    """The file has the right type but its text cannot be read (corrupt, encrypted…)."""


@dataclass(frozen=True)
class Sniffed:
    content_type: str


def sniff(data: bytes, filename: str | None = None) -> Sniffed:
    """PDF by its magic bytes; text if it decodes as UTF-8 without control characters
    (Markdown when it looks like it or is named so); anything else is refused (415)."""
    if data.startswith(b"%PDF-"):
        return Sniffed(PDF)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UnsupportedMediaType(
            "Only PDF, plain-text and Markdown files are accepted.", code="unsupported_file_type"
        ) from exc
    if _CONTROL.search(text, 0, 65536):
        raise UnsupportedMediaType(
            "The file is binary: only PDF, plain-text and Markdown files are accepted.",
            code="unsupported_file_type",
        )
    named_md = bool(filename and filename.lower().endswith((".md", ".markdown")))
    return Sniffed(MARKDOWN if named_md or _MARKDOWN_HINTS.search(text[:20000]) else TEXT)


def extract_text(data: bytes, content_type: str) -> tuple[str, int]:
    """The document's text and its number of pages (1 for text files)."""
    if content_type != PDF:
        return data.decode("utf-8-sig"), 1
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise ExtractionError("The PDF is encrypted.")
        pages = [page.extract_text() or "" for page in reader.pages]
    except ExtractionError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, OSError) as exc:
        raise ExtractionError(f"The PDF could not be read: {exc}") from exc
    text = "\n\n".join(p.strip() for p in pages if p.strip())
    if not text:
        raise ExtractionError("The PDF contains no extractable text (scanned images?).")
    return text, len(pages)
