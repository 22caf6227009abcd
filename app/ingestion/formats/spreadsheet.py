"""XLSX (openpyxl, read-only: rows streamed, formulas' cached values, macros never read):
each sheet a table whose first non-empty row is its header; each chunk knows its sheet
and rows. Cells are counted as they stream: a sheet of a million empty cells stops at the
limit instead of being walked to its end."""

from __future__ import annotations

import io
import zipfile
from typing import Any

from app.core.location import Location
from app.ingestion.formats import archive
from app.ingestion.formats.base import Block, Budget, Extracted, ExtractionError, table_row

MAX_CELLS = 1_000_000
MAX_COLUMNS = 512


def read(data: bytes, budget: Budget) -> Extracted:
    """The rows of every sheet, in workbook order."""
    archive.check(data).close()
    from openpyxl import load_workbook

    try:
        book = load_workbook(io.BytesIO(data), read_only=True, data_only=True, keep_vba=False)
    except (zipfile.BadZipFile, KeyError, ValueError, TypeError, OSError) as exc:
        raise ExtractionError(f"The spreadsheet could not be read: {exc}") from exc
    blocks: list[Block] = []
    cells = 0
    try:
        for sheet in book.worksheets:
            header: str | None = None
            for number, row in enumerate(sheet.iter_rows(values_only=True), start=1):
                cells += len(row)
                if cells > MAX_CELLS:
                    raise ExtractionError(
                        f"The spreadsheet has more than {MAX_CELLS} cells; it is refused."
                    )
                values = [_text(value) for value in row[:MAX_COLUMNS]]
                while values and not values[-1]:
                    values.pop()
                if not values:
                    continue
                line = budget.take(table_row(values))
                where = Location(sheet=str(sheet.title))
                blocks.append(Block("row", line, where, header=header, row=number))
                header = header or line
    except ExtractionError:
        raise
    except (zipfile.BadZipFile, KeyError, ValueError, TypeError, OSError) as exc:
        raise ExtractionError(f"The spreadsheet could not be read: {exc}") from exc
    finally:
        book.close()
    return Extracted(blocks, pages=max(1, len(book.sheetnames)))


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()
