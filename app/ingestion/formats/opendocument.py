"""ODT (OpenDocument text, LibreOffice's own): `content.xml` read with defusedxml;
`text:h` opens a section at its outline level, lists and tables kept as such."""

from __future__ import annotations

from xml.etree.ElementTree import Element

from app.ingestion.formats import archive
from app.ingestion.formats.base import Block, Budget, Extracted, Headings, table_row
from app.ingestion.formats.xml import local, parse

_TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"


def read(data: bytes, budget: Budget) -> Extracted:
    """The blocks of an OpenDocument text."""
    root = parse(archive.read(archive.check(data), "content.xml"), "document's content")
    body = next((e for e in root.iter() if local(e.tag) == "text" and e is not root), None)
    headings = Headings()
    blocks: list[Block] = []
    for child in list(body) if body is not None else []:
        _element(child, headings, blocks, budget)
    return Extracted(blocks)


def _element(node: Element, headings: Headings, blocks: list[Block], budget: Budget) -> None:
    name = local(node.tag)
    if name == "h":
        text = budget.take(_text(node))
        if text:
            level = int(node.get(f"{{{_TEXT}}}outline-level", "1") or 1)
            headings.enter(level, text)
            blocks.append(Block("heading", text, headings.location()))
    elif name == "p":
        text = budget.take(_text(node))
        if text:
            blocks.append(Block("text", text, headings.location()))
    elif name == "list":
        items = [_text(item) for item in node.iter() if local(item.tag) == "list-item"]
        lines = "\n".join(f"- {item}" for item in items if item)
        if lines:
            blocks.append(Block("list", budget.take(lines), headings.location()))
    elif name == "table":
        header: str | None = None
        for row in (e for e in node.iter() if local(e.tag) == "table-row"):
            cells = [_text(cell) for cell in row if local(cell.tag) == "table-cell"]
            if any(cells):
                line = budget.take(table_row(cells))
                blocks.append(Block("row", line, headings.location(), header=header))
                header = header or line
    elif name == "section":
        for child in node:
            _element(child, headings, blocks, budget)


def _text(node: Element) -> str:
    """An element's text, `text:s` and `text:tab` as spaces, `text:line-break` too."""
    parts: list[str] = []
    for element in node.iter():
        if local(element.tag) in ("s", "tab", "line-break"):
            parts.append(" ")
        if element.text:
            parts.append(element.text)
        if element is not node and element.tail:
            parts.append(element.tail)
    return " ".join("".join(parts).split())
