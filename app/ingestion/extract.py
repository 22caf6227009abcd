"""What a file is, judged by its content (not its name), and its text.

The readers live in `app.ingestion.formats`, one module per format; this module is the
door the rest of ingestion uses.
"""

from __future__ import annotations

from app.ingestion.formats.base import ExtractionError, strip_control
from app.ingestion.formats.read import extract
from app.ingestion.formats.sniff import Sniffed, sniff
from app.ingestion.formats.types import MARKDOWN, PDF, TEXT, TEXT_TYPES

__all__ = [
    "MARKDOWN",
    "PDF",
    "TEXT",
    "TEXT_TYPES",
    "ExtractionError",
    "Sniffed",
    "extract",
    "extract_text",
    "sniff",
    "strip_control",
]


def extract_text(
    data: bytes, content_type: str, *, max_chars: int | None = None, max_pages: int | None = None
) -> tuple[str, int]:
    """The document's text (its blocks, a blank line apart) and its number of pages (1 for
    an unpaged file). More than `max_chars` characters of text or `max_pages` pages is an
    `ExtractionError`, found while reading (a bomb stops at the limit)."""
    if content_type == TEXT:  # plain text as it came (paragraphs and all)
        text = strip_control(data.decode("utf-8-sig"))
        if max_chars is not None and len(text) > max_chars:
            raise ExtractionError(
                f"The document's text is longer than the limit of {max_chars} characters."
            )
        return text, 1
    found = extract(data, content_type, max_chars=max_chars, max_pages=max_pages)
    return "\n\n".join(block.text for block in found.blocks), found.pages
