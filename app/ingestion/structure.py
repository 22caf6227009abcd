"""Chunking that keeps a document's structure (issue 29).

Blocks are grouped by where they are (section, slide, sheet, chapter); a chunk never
spans two groups, so it never crosses a heading. Inside a group, blocks are packed up to
`max_tokens` with the overlap of `chunking`: prose is cut at paragraphs and sentences, a
list or code block is kept whole when it fits (cut at lines when it does not), and table
rows are packed whole, each chunk of a table starting with the table's header row. Pages
and rows are ranges: a chunk over pages 3 and 4 is `{"page": 3, "page_end": 4}`, one of
rows 2 to 40 `{"rows": "2-40"}`.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.core.location import Location
from app.ingestion.chunking import Chunk, prose_units
from app.ingestion.formats.base import Block
from app.llm.tokens import count_tokens, truncate_to_tokens


@dataclass(frozen=True)
class _Unit:
    text: str
    tokens: int
    block: Block


def _group_key(block: Block) -> tuple[object, ...]:
    where = block.location
    return (where.get("section"), where.get("chapter"), where.get("slide"), where.get("sheet"))


def _groups(blocks: list[Block]) -> list[list[Block]]:
    """Runs of blocks in one place; a heading starts a new run, except right under its
    parent heading when the parent has no text of its own (a section smaller than a chunk:
    `3 Refunds` then `3.2 Annual plans` share a chunk, located at the deeper one)."""
    groups: list[list[Block]] = []
    key: tuple[object, ...] | None = None
    for block in blocks:
        new_key = _group_key(block)
        only_headings = bool(groups) and all(b.kind == "heading" for b in groups[-1])
        if (
            not groups
            or (new_key != key and not only_headings)
            or (block.kind == "heading" and not only_headings)
        ):
            groups.append([])
        key = new_key
        groups[-1].append(block)
    return groups


def _lines(text: str, max_tokens: int) -> list[str]:
    """A block too long to keep whole, cut at its lines (a line too long cut at tokens)."""
    out: list[str] = []
    current: list[str] = []
    size = 0
    for line in text.splitlines():
        while count_tokens(line) > max_tokens:
            head = truncate_to_tokens(line, max_tokens)
            out.append(head)
            line = line[len(head) :]
        cost = count_tokens(line)
        if current and size + cost > max_tokens:
            out.append("\n".join(current))
            current, size = [], 0
        current.append(line)
        size += cost
    if current:
        out.append("\n".join(current))
    return [part for part in out if part.strip()]


def _units(group: list[Block], max_tokens: int) -> list[_Unit]:
    units: list[_Unit] = []
    for block in group:
        if block.kind == "text":
            parts = prose_units(block.text, max_tokens)
        elif block.kind in ("list", "code"):
            whole = block.text.strip("\n")
            parts = [whole] if count_tokens(whole) <= max_tokens else _lines(whole, max_tokens)
        else:  # heading, row: one line each (a row longer than a chunk is cut)
            parts = [block.text]
            if block.kind == "row" and count_tokens(block.text) > max_tokens:
                parts = _lines(block.text, max_tokens)
        units += [_Unit(part, count_tokens(part), block) for part in parts if part.strip()]
    return units


def chunk_blocks(
    blocks: list[Block], *, max_tokens: int = 400, overlap_tokens: int = 60
) -> list[Chunk]:
    """Chunks of at most `max_tokens` that keep the blocks' structure (see the module)."""
    chunks: list[Chunk] = []
    for group in _groups(blocks):
        for units in _pack(_units(group, max_tokens), max_tokens, overlap_tokens):
            chunks.append(_chunk(len(chunks), units))
    return chunks


def _header_cost(unit: _Unit, current: list[_Unit]) -> int:
    """The tokens of the header row a chunk must repeat before `unit` (0 if none is due)."""
    header = unit.block.header
    if unit.block.kind != "row" or header is None:
        return 0
    if any(
        u.block.kind == "row" and (u.text == header or u.block.header == header) for u in current
    ):
        return 0
    return count_tokens(header)


def _pack(units: list[_Unit], max_tokens: int, overlap_tokens: int) -> list[list[_Unit]]:
    packed: list[list[_Unit]] = []
    current: list[_Unit] = []
    size = 0
    for unit in units:
        cost = unit.tokens + _header_cost(unit, current)
        if current and size + cost > max_tokens:
            packed.append(current)
            carried: list[_Unit] = []
            carried_size = 0
            if unit.block.kind == "text":  # prose overlaps; tables and lists do not
                for previous in reversed(current):
                    if previous.block.kind != "text":
                        break
                    if (
                        carried_size + previous.tokens > overlap_tokens
                        or carried_size + previous.tokens + unit.tokens > max_tokens
                    ):
                        break
                    carried.insert(0, previous)
                    carried_size += previous.tokens
            current, size = carried, carried_size
            cost = unit.tokens + _header_cost(unit, current)
        current.append(unit)
        size += cost
    if current:
        packed.append(current)
    return packed


def _chunk(ordinal: int, units: list[_Unit]) -> Chunk:
    lines: list[str] = []
    first = units[0]
    if first.block.kind == "row" and first.block.header is not None:
        lines.append(first.block.header)  # the table's header row, repeated
    lines += [u.text for u in units]
    text = "\n".join(lines)
    return Chunk(ordinal=ordinal, text=text, tokens=count_tokens(text), location=_where(units))


def _where(units: list[_Unit]) -> Location:
    content = [u for u in units if u.block.kind != "heading"] or units
    where = Location(**content[0].block.location)
    pages = [u.block.location["page"] for u in units if "page" in u.block.location]
    if pages and max(pages) > min(pages):
        where["page"], where["page_end"] = min(pages), max(pages)
    rows = [u.block.row for u in units if u.block.row is not None]
    if rows:
        first, last = min(rows), max(rows)
        where["rows"] = f"{first}-{last}" if last > first else str(first)
    return where
