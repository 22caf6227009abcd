"""PDF (pypdf): each page's text with its page number; a page read once however many pages
draw the same content (issue 33). The document's outline (its bookmarks, which most
generated PDFs carry) gives the headings: a bookmark's title found as a line of the page it
opens on is a heading there, one not found opens its section where the page's text would
reach it; either way the section path follows the outline's nesting."""

from __future__ import annotations

import io
import re
from typing import Any

from app.ingestion.formats.base import (
    Block,
    Budget,
    Extracted,
    ExtractionError,
    Headings,
    strip_control,
)

MAX_OUTLINE_ITEMS = 5_000
"""Bookmarks read at most (a hostile outline stops there; the text is read all the same)."""
MAX_MATCHED_PER_PAGE = 64
"""A page's bookmarks looked for among its lines; more open their sections unmatched."""
MAX_OUTLINE_DEPTH = 8
"""Nesting followed at most: deeper bookmarks are left out of section paths."""
Outline = dict[int, list[tuple[int, str]]]
"""The bookmarks by the page they open on (1-based): (level, title), in outline order."""


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
        outline = _outline(reader, count)
        headings = Headings()
        read: dict[tuple[object, ...], str] = {}
        for number, page in enumerate(reader.pages, start=1):
            key = _drawing(page)
            known = read.get(key) if key is not None else None
            text = known if known is not None else page.extract_text() or ""
            if key is not None:
                read[key] = text
            budget.take(text)  # page by page: a bomb stops at the limit
            blocks += _page_blocks(_clean(text), number, outline.get(number, []), headings)
    except ExtractionError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, OSError, RecursionError) as exc:
        raise ExtractionError(f"The PDF could not be read: {exc}") from exc
    if not blocks:
        raise ExtractionError("The PDF contains no extractable text (scanned images?).")
    return Extracted(blocks, pages=count)


def _outline(reader: Any, pages: int) -> Outline:
    """The document's bookmarks by page; none when it has no outline or one pypdf cannot
    read (the text is what matters: a broken outline never fails a document)."""
    from pypdf.errors import PyPdfError

    found: Outline = {}
    seen = 0

    def walk(items: list[Any], level: int) -> None:
        nonlocal seen
        for item in items:
            if seen >= MAX_OUTLINE_ITEMS:
                return
            if isinstance(item, list):  # the children of the bookmark before it
                if level < MAX_OUTLINE_DEPTH:
                    walk(item, level + 1)
                continue
            seen += 1
            title = " ".join(str(getattr(item, "title", "") or "").split())[:200]
            page = reader.get_destination_page_number(item)
            if title and page is not None and 0 <= page < pages:
                found.setdefault(page + 1, []).append((level, title))

    try:
        walk(reader.outline, 1)
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return {}
    return found


def _page_blocks(
    text: str, number: int, bookmarks: list[tuple[int, str]], headings: Headings
) -> list[Block]:
    """The page's paragraphs, its bookmarks' titles as headings where they are lines of it."""
    blocks: list[Block] = []
    lines = text.splitlines()
    at = _title_lines(lines, bookmarks)
    body: list[str] = []

    def flush() -> None:
        for part in re.split(r"\n\s*\n", "\n".join(body)):
            if part.strip():
                blocks.append(Block("text", part.strip(), headings.location(page=number)))
        body.clear()

    upcoming = 0
    for index, line in enumerate(lines):
        # A bookmark whose title is no line of the page opens its section where the text
        # reaches it: after the heading before it in the outline.
        while upcoming < len(bookmarks) and at[upcoming] is None:
            headings.enter(*bookmarks[upcoming])
            upcoming += 1
        if upcoming < len(bookmarks) and at[upcoming] == index:
            flush()
            headings.enter(*bookmarks[upcoming])
            upcoming += 1
            blocks.append(Block("heading", line.strip(), headings.location(page=number)))
        else:
            body.append(line)
    for bookmark in bookmarks[upcoming:]:  # on no line: their sections go on next page
        headings.enter(*bookmark)
    flush()
    return blocks


def _title_lines(lines: list[str], bookmarks: list[tuple[int, str]]) -> list[int | None]:
    """The line each bookmark's title is (None: none), in outline order; the first
    `MAX_MATCHED_PER_PAGE` bookmarks of a page are looked for (each scan is the page)."""
    plain = [_plain(line) for line in lines]
    found: list[int | None] = []
    start = 0
    for position, (_, title) in enumerate(bookmarks):
        line = None
        if position < MAX_MATCHED_PER_PAGE:
            line = next((i for i in range(start, len(plain)) if _is_title(plain[i], title)), None)
        found.append(line)
        if line is not None:
            start = line + 1
    return found


def _plain(line: str) -> str:
    return " ".join(line.split()).casefold()


def _is_title(line: str, title: str) -> bool:
    """Whether a page's line (plain) is the bookmark's title, maybe numbered ("3.2 Annual
    plans" for the bookmark "Annual plans")."""
    wanted = _plain(title)
    if not line or not wanted:
        return False
    return line == wanted or (line.endswith(" " + wanted) and len(line) <= len(wanted) + 12)


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
