"""CSV (comma, semicolon or tab): a table whose first row is its header; each data row
keeps its row number, so a chunk knows its rows and repeats the header."""

from __future__ import annotations

import csv
import io

from app.core.location import Location
from app.ingestion.formats.base import Block, Budget, Extracted, ExtractionError, table_row

MAX_FIELD_CHARS = 1_000_000


def dialect(sample: str) -> type[csv.Dialect] | None:
    """The delimiter of a text that reads as a table: at least two rows, every sampled row
    with the same number (two or more) of fields, a short header. None for prose."""
    lines = [line for line in sample.splitlines()[:50] if line.strip()]
    if len(lines) < 2:
        return None
    if len(lines) == 50 or not sample.endswith("\n"):
        lines = lines[:-1]  # the sample may cut its last row
    try:
        found = csv.Sniffer().sniff("\n".join(lines), delimiters=",;\t")
    except csv.Error:
        return None
    rows = list(csv.reader(lines, found))
    widths = {len(row) for row in rows}
    if len(rows) < 2 or len(widths) != 1 or widths.pop() < 2:
        return None
    if any(len(cell) > 80 for cell in rows[0]):
        return None
    return found


def read(text: str, budget: Budget) -> Extracted:
    """The rows of a CSV text, each with its header and row number."""
    budget.take(text)
    found = dialect(text[:20000]) or csv.excel
    csv.field_size_limit(MAX_FIELD_CHARS)
    blocks: list[Block] = []
    header: str | None = None
    try:
        for number, cells in enumerate(csv.reader(io.StringIO(text), found), start=1):
            if not any(cell.strip() for cell in cells):
                continue
            line = table_row(cells)
            if header is None:
                header = line
                blocks.append(Block("row", line, Location(), row=number))
            else:
                blocks.append(Block("row", line, Location(), header=header, row=number))
    except csv.Error as exc:
        raise ExtractionError(f"The CSV could not be read: {exc}") from exc
    return Extracted(blocks)
