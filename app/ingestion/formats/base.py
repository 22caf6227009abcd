"""What every format reader produces: the document as ordered blocks, each with its place.

A reader turns a file into `Block`s (headings, paragraphs, lists, code, table rows) and
gives each the `Location` it sits at; `app.ingestion.structure` chunks them without
crossing a heading, repeating a table's header row in every chunk that holds its rows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal, Unpack

from app.core.location import SECTION_SEPARATOR, Location

# Control characters other than tab, newline, form feed and carriage return: binary data.
CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f]")

BlockKind = Literal["heading", "text", "list", "code", "row"]


class ExtractionError(Exception):
    """The file has the right type but its text cannot be read (corrupt, encrypted, over a
    limit, hostile): a permanent failure, with a message for the document's `error`."""


@dataclass(frozen=True)
class Block:
    """One piece of a document as its author laid it out."""

    kind: BlockKind
    text: str
    location: Location = field(default_factory=Location)
    header: str | None = None
    """A table row's header row (repeated at the top of every chunk holding its rows)."""
    row: int | None = None
    """A spreadsheet row's number, as the spreadsheet shows it (for `rows`)."""


@dataclass(frozen=True)
class Extracted:
    """A document's blocks and its number of pages (slides, sheets; 1 when unpaged)."""

    blocks: list[Block]
    pages: int = 1


class Budget:
    """The characters of text a document may have, counted as a reader goes: a document
    past the limit stops at the limit, not after it was read whole."""

    def __init__(self, max_chars: int | None) -> None:
        self.max_chars = max_chars
        self.used = 0

    def take(self, text: str) -> str:
        """Count `text`; raise `ExtractionError` once the total is over the limit."""
        self.used += len(text)
        if self.max_chars is not None and self.used > self.max_chars:
            raise ExtractionError(
                f"The document's text is longer than the limit of {self.max_chars} characters."
            )
        return text


class Headings:
    """The section path of a document as its headings open and close sections."""

    def __init__(self) -> None:
        self._open: list[tuple[int, str]] = []

    def enter(self, level: int, title: str) -> None:
        """A heading of `level` (1 outermost) closes the sections at its level and below."""
        while self._open and self._open[-1][0] >= level:
            self._open.pop()
        self._open.append((level, " ".join(title.split())[:200]))

    @property
    def path(self) -> str:
        """The open sections, outermost first (`3 Refunds > 3.2 Annual plans`)."""
        return SECTION_SEPARATOR.join(title for _, title in self._open if title)

    def location(self, **extra: Unpack[Location]) -> Location:
        """The current section path (when any) with the other keys given."""
        found = Location(**extra)
        if self.path:
            found["section"] = self.path
        return found


def table_row(cells: list[str]) -> str:
    """A table row as one Markdown-style line, cells kept apart (`| a | b |`)."""
    return "| " + " | ".join(" ".join(c.split()).replace("|", "\\|") for c in cells) + " |"


def strip_control(text: str) -> str:
    """`text` without NUL and the other C0 control characters but tab, newlines, form feed
    (PostgreSQL cannot store NUL in text; the others are noise to the model)."""
    return CONTROL.sub("", text) if CONTROL.search(text) else text
