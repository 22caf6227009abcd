"""HTML (and EPUB's XHTML): h1-h6 open sections, tables keep their rows and header, lists
and `<pre>` stay whole; scripts, styles and the like are skipped.

The stdlib parser is iterative, so deep nesting costs no stack; past `MAX_DEPTH` open
elements the page is refused (no real page nests that deep; a hostile one might, to make
the readers after it slow).
"""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Unpack

from app.core.location import Location
from app.ingestion.formats.base import (
    Block,
    Budget,
    Extracted,
    ExtractionError,
    Headings,
    table_row,
)

MAX_DEPTH = 1000
_SKIP = {"script", "style", "template", "noscript", "svg", "math", "head", "iframe", "object"}
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta"}
_VOID |= {"param", "source", "track", "wbr"}
_BLOCK = {"p", "div", "section", "article", "main", "header", "footer", "aside", "nav"}
_BLOCK |= {"blockquote", "figure", "figcaption", "dl", "dt", "dd", "address", "form"}
_BLOCK |= {"fieldset", "body", "br", "hr"}
_HEADINGS = {f"h{n}": n for n in range(1, 7)}


class _Reader(HTMLParser):
    def __init__(self, budget: Budget, headings: Headings, base: Location) -> None:
        super().__init__(convert_charrefs=True)
        self.budget, self.headings, self.base = budget, headings, base
        self.blocks: list[Block] = []
        self.stack: list[str] = []
        self.skipping = 0
        self.text: list[str] = []
        self.title: list[str] = []
        self.in_title = False
        self.list_depth = 0
        self.list_items: list[str] = []
        self.pre = 0
        self.tables_open = 0
        self.cell: list[str] | None = None
        self.row: list[str] | None = None
        self.header: str | None = None
        self.first_heading: str | None = None

    def _where(self) -> Location:
        return self.headings.location(**self.base)

    def _flush(self) -> None:
        text = " ".join("".join(self.text).split())
        self.text.clear()
        if not text:
            return
        if self.list_depth:
            self.list_items.append(text)
        else:
            self.blocks.append(Block("text", self.budget.take(text), self._where()))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _VOID:
            if tag in ("br", "hr") and not self.skipping and self.cell is None:
                self._flush()
            return
        self.stack.append(tag)
        if len(self.stack) > MAX_DEPTH:
            raise ExtractionError(
                f"The HTML nests elements deeper than {MAX_DEPTH} levels; it is refused."
            )
        if self.skipping or tag in _SKIP:
            self.skipping += tag in _SKIP or bool(self.skipping)
            return
        if tag == "title":
            self.in_title = True
        elif tag in _HEADINGS or tag in _BLOCK:
            if self.cell is None:
                self._flush()
        elif tag in ("ul", "ol"):
            self._flush()
            self.list_depth += 1
        elif tag == "li":
            self._flush()
        elif tag == "pre":
            self._flush()
            self.pre += 1
        elif tag == "table":
            self._flush()
            self.tables_open += 1
            if self.tables_open == 1:
                self.header = None
        elif tag == "tr" and self.tables_open == 1:
            self.row = []
        elif tag in ("td", "th") and self.row is not None and self.tables_open == 1:
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in _VOID or tag not in self.stack:
            return
        while self.stack:  # close what was left open inside it (`<p>` without `</p>`)
            if self.stack.pop() == tag:
                break
        if self.skipping:
            self.skipping -= 1
            return
        if tag == "title":
            self.in_title = False
        elif tag in _HEADINGS:
            title = " ".join("".join(self.text).split())
            self.text.clear()
            if title:
                self.headings.enter(_HEADINGS[tag], title)
                self.first_heading = self.first_heading or title
                self.blocks.append(Block("heading", self.budget.take(title), self._where()))
        elif tag in _BLOCK or tag == "li":
            if self.cell is None:
                self._flush()
        elif tag in ("ul", "ol") and self.list_depth:
            self._flush()
            self.list_depth -= 1
            if not self.list_depth and self.list_items:
                items = "\n".join(f"- {item}" for item in self.list_items)
                self.blocks.append(Block("list", self.budget.take(items), self._where()))
                self.list_items = []
        elif tag == "pre" and self.pre:
            self.pre -= 1
            code = "".join(self.text).strip("\n")
            self.text.clear()
            if code.strip():
                self.blocks.append(Block("code", self.budget.take(code), self._where()))
        elif tag in ("td", "th") and self.cell is not None and self.row is not None:
            self.row.append(" ".join("".join(self.cell).split()))
            self.cell = None
        elif tag == "tr" and self.row is not None:
            if any(self.row):
                line = self.budget.take(table_row(self.row))
                if self.header is None:
                    self.header = line
                    self.blocks.append(Block("row", line, self._where(), header=None))
                else:
                    self.blocks.append(Block("row", line, self._where(), header=self.header))
            self.row = None
        elif tag == "table" and self.tables_open:
            self.tables_open -= 1
            if not self.tables_open:
                self.header = None

    def handle_data(self, data: str) -> None:
        if self.skipping:
            return
        if self.in_title:
            self.title.append(data)
        elif self.cell is not None:
            self.cell.append(data)
        else:
            self.text.append(data)


def read_html(
    text: str, budget: Budget, headings: Headings | None = None, **base: Unpack[Location]
) -> tuple[Extracted, str]:
    """The blocks of an HTML page and its title (`<title>` or its first heading)."""
    reader = _Reader(budget, headings or Headings(), base)
    try:
        reader.feed(text)
        reader.close()
    except (AssertionError, ValueError) as exc:  # the parser's own complaints
        raise ExtractionError(f"The HTML could not be read: {exc}") from exc
    reader._flush()
    title = " ".join("".join(reader.title).split()) or reader.first_heading or ""
    return Extracted(reader.blocks), title


def read(text: str, budget: Budget) -> Extracted:
    """The blocks of an HTML document."""
    return read_html(text, budget)[0]
