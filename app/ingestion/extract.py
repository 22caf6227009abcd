"""What a file is, judged by its content (not its name), and its text."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import Any

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
    """The content type a file was recognised as, and a text file's length."""

    content_type: str
    chars: int | None = None
    """The length of a text file's text; None for a PDF (known only once extracted)."""


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
    markdown = named_md or _MARKDOWN_HINTS.search(text[:20000])
    return Sniffed(MARKDOWN if markdown else TEXT, len(text))


def extract_text(
    data: bytes, content_type: str, *, max_chars: int | None = None, max_pages: int | None = None
) -> tuple[str, int]:
    """The document's text and its number of pages (1 for text files).

    Control characters other than whitespace are dropped: PostgreSQL cannot store NUL in
    text, and the others are noise to the model. More than `max_chars` characters of text
    or `max_pages` pages is an `ExtractionError`, found before the whole PDF is read."""
    if content_type != PDF:
        text = data.decode("utf-8-sig")
        _check_length(len(text), max_chars)
        return strip_control(text), 1
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise ExtractionError("The PDF is encrypted.")
        count = len(reader.pages)
        if max_pages is not None and count > max_pages:
            raise ExtractionError(f"The PDF has {count} pages; the limit is {max_pages}.")
        pages, length = [], 0
        read: dict[tuple[object, ...], str] = {}
        for page in reader.pages:
            key = _drawing(page)
            known = read.get(key) if key is not None else None
            text = known if known is not None else page.extract_text() or ""
            if key is not None:
                read[key] = text
            pages.append(text)
            length += len(text)
            _check_length(length, max_chars)  # page by page: a bomb stops at the limit
    except ExtractionError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, OSError) as exc:
        raise ExtractionError(f"The PDF could not be read: {exc}") from exc
    text = "\n\n".join(p.strip() for p in map(_clean_pdf_text, pages) if p.strip())
    if not text:
        raise ExtractionError("The PDF contains no extractable text (scanned images?).")
    return text, count


def _drawing(page: Any) -> tuple[object, ...] | None:
    """What a page's text is extracted from: its content streams (indirect objects), its
    resources and its rotation; None when that cannot be told from another page's. Pages
    drawing the same stream have the same text, read once: pypdf parses a page's stream
    anew for every page, and 15 pages sharing a stream of 100,000 operations cost ~10 s of
    CPU each (issue 33)."""
    from pypdf.generic import IndirectObject

    contents = page.raw_get("/Contents") if "/Contents" in page else None
    parts: list[Any] = contents if isinstance(contents, list) else [contents]
    if not parts or not all(isinstance(part, IndirectObject) for part in parts):
        return None
    resources: Any = page.raw_get("/Resources") if "/Resources" in page else None
    if isinstance(resources, IndirectObject):
        shared: object = (resources.idnum, resources.generation)
    else:  # inherited from the page tree: the same object on every page that inherits it
        shared = id(resources)
    streams = tuple((part.idnum, part.generation) for part in parts)
    return (streams, shared, page.get("/Rotate", 0))


def strip_control(text: str) -> str:
    """`text` without NUL and the other C0 control characters but tab, newlines, form feed."""
    return _CONTROL.sub("", text) if _CONTROL.search(text) else text


def _clean_pdf_text(text: str) -> str:
    # A PDF's text can hold lone surrogates, which no UTF-8 column stores either.
    return strip_control(text.encode("utf-8", "replace").decode("utf-8"))


def _check_length(chars: int, max_chars: int | None) -> None:
    if max_chars is not None and chars > max_chars:
        raise ExtractionError(
            f"The document's text is longer than the limit of {max_chars} characters."
        )
