"""PDF (pypdf): each page's text with its page number; a page read once however many pages
draw the same content (issue 33)."""

from __future__ import annotations

import io
import re
from typing import Any

from app.core.location import Location
from app.ingestion.formats.base import Block, Budget, Extracted, ExtractionError, strip_control


def read(data: bytes, budget: Budget, max_pages: int | None) -> Extracted:
    """The pages' text as blocks; more than `max_pages` pages is refused before reading."""
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    blocks: list[Block] = []
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise ExtractionError("The PDF is encrypted.")
        count = len(reader.pages)  # the page tree walked (pypdf bounds its depth and size)
        if count == 0:  # a /Count with no /Kids behind it, or kids none of which is a page
            raise ExtractionError("The PDF has no pages (its page tree names none).")
        if max_pages is not None and count > max_pages:
            raise ExtractionError(f"The PDF has {count} pages; the limit is {max_pages}.")
        read: dict[tuple[object, ...], str] = {}
        for number, page in enumerate(reader.pages, start=1):
            key = _drawing(page)
            known = read.get(key) if key is not None else None
            text = known if known is not None else page.extract_text() or ""
            if key is not None:
                read[key] = text
            budget.take(text)  # page by page: a bomb stops at the limit
            for part in re.split(r"\n\s*\n", _clean(text)):
                if part.strip():
                    blocks.append(Block("text", part.strip(), Location(page=number)))
    except ExtractionError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, OSError, RecursionError) as exc:
        raise ExtractionError(f"The PDF could not be read: {exc}") from exc
    if not blocks:
        raise ExtractionError("The PDF contains no extractable text (scanned images?).")
    return Extracted(blocks, pages=count)


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


def _clean(text: str) -> str:
    # A PDF's text can hold lone surrogates, which no UTF-8 column stores either.
    return strip_control(text.encode("utf-8", "replace").decode("utf-8"))
