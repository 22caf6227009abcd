"""Markdown: `#` headings open sections; fenced code, lists and pipe tables stay whole."""

from __future__ import annotations

import re

from app.ingestion.formats.base import Block, Budget, Extracted, Headings

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_LIST = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")


def read(text: str, budget: Budget) -> Extracted:
    """The blocks of a Markdown text."""
    budget.take(text)
    blocks: list[Block] = []
    headings = Headings()
    lines = text.splitlines()
    paragraph: list[str] = []

    def flush() -> None:
        if any(line.strip() for line in paragraph):
            blocks.append(Block("text", "\n".join(paragraph).strip("\n"), headings.location()))
        paragraph.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        heading = _HEADING.match(line)
        if heading:
            flush()
            headings.enter(len(heading.group(1)), heading.group(2))
            blocks.append(Block("heading", line.strip(), headings.location()))
        elif opening := _FENCE.match(line):
            flush()
            fence = opening.group(1)
            code = [line]
            i += 1
            while i < len(lines):
                code.append(lines[i])
                if lines[i].strip().startswith(fence):
                    break
                i += 1
            blocks.append(Block("code", "\n".join(code), headings.location()))
        elif _LIST.match(line):
            flush()
            items = [line]
            while i + 1 < len(lines) and (
                _LIST.match(lines[i + 1])
                or (lines[i + 1].startswith("  ") and lines[i + 1].strip())
            ):
                i += 1
                items.append(lines[i])
            blocks.append(Block("list", "\n".join(items), headings.location()))
        elif (
            line.lstrip().startswith("|") and i + 1 < len(lines) and _TABLE_RULE.match(lines[i + 1])
        ):
            flush()
            header = line.strip()
            i += 2
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                blocks.append(Block("row", lines[i].strip(), headings.location(), header=header))
                i += 1
            continue
        elif not line.strip():
            flush()
        else:
            paragraph.append(line)
        i += 1
    flush()
    return Extracted(blocks)


def read_plain(text: str, budget: Budget) -> Extracted:
    """Plain text: paragraphs, no structure."""
    budget.take(text)
    return Extracted([Block("text", part) for part in re.split(r"\n\s*\n", text) if part.strip()])
