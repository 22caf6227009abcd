"""Where a passage sits in its document: page, slide, sheet and rows, section, chapter.

Stored with each chunk (migration 0029) and carried by every source a client sees, so a
citation can say "p. 12, 3 Refunds > 3.2 Annual plans". Only the keys that apply are
present; a chunk indexed before locations existed has none (`{}`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from typing_extensions import TypedDict

SECTION_SEPARATOR = " \u203a "  # a single right-pointing angle quotation mark


class Location(TypedDict, total=False):
    """A passage's place in its document (only the keys that apply)."""

    page: int
    """PDF: the page the passage starts on (1-based)."""
    page_end: int
    """PDF: the page it ends on, when not `page`."""
    slide: int
    """PPTX: the slide (1-based)."""
    sheet: str
    """XLSX: the sheet's name (a CSV has no sheet, only `rows`)."""
    rows: str
    """XLSX/CSV: the rows the passage holds, `first-last` as the spreadsheet numbers them."""
    section: str
    """The headings above the passage, outermost first, joined by ` > `."""
    chapter: str
    """EPUB: the chapter's title (or its file's name when it has none)."""


_INT_KEYS: tuple[Literal["page", "page_end", "slide"], ...] = ("page", "page_end", "slide")
_STR_KEYS: tuple[Literal["sheet", "rows", "section", "chapter"], ...] = (
    "sheet",
    "rows",
    "section",
    "chapter",
)


def location_of(value: Mapping[str, Any] | None) -> Location:
    """A stored location (JSON) as a `Location`, keeping only known keys of the right type:
    a row written before locations existed reads as `{}`."""
    found = Location()
    if not value:
        return found
    for number in _INT_KEYS:
        item = value.get(number)
        if isinstance(item, int) and not isinstance(item, bool):
            found[number] = item
    for name in _STR_KEYS:
        text = value.get(name)
        if isinstance(text, str) and text:
            found[name] = text
    return found


def describe(location: Mapping[str, Any] | None) -> str:
    """The location as a reader cites it: `p. 12-13 · sheet Prices, rows 2-40 · 3 Refunds`;
    empty when there is none."""
    where = location_of(location)
    parts: list[str] = []
    if "chapter" in where:
        parts.append(f"chapter {where['chapter']}")
    if "page" in where:
        end = where.get("page_end")
        parts.append(f"p. {where['page']}\u2013{end}" if end else f"p. {where['page']}")
    if "slide" in where:
        parts.append(f"slide {where['slide']}")
    if "sheet" in where:
        rows = where.get("rows")
        parts.append(f"sheet {where['sheet']}, rows {rows}" if rows else f"sheet {where['sheet']}")
    elif "rows" in where:  # a CSV: rows, no sheet
        parts.append(f"rows {where['rows']}")
    if "section" in where:
        parts.append(where["section"])
    return " · ".join(parts)
