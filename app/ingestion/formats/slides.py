"""PPTX (python-pptx): one section per slide, titled by the slide's title; its text boxes,
tables and speaker notes in order. A macro-enabled deck (.pptm) is read for its text."""

from __future__ import annotations

import io
import zipfile
from typing import Any

from app.core.location import Location
from app.ingestion.formats import archive
from app.ingestion.formats.base import Block, Budget, Extracted, ExtractionError, table_row


def read(data: bytes, budget: Budget) -> Extracted:
    """The blocks of a presentation, slide by slide."""
    archive.check(data).close()
    from pptx import Presentation
    from pptx.exc import PackageNotFoundError

    try:
        deck = Presentation(io.BytesIO(data))
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise ExtractionError(f"The presentation could not be read: {exc}") from exc
    blocks: list[Block] = []
    count = 0
    for number, slide in enumerate(deck.slides, start=1):
        count = number
        title_shape = slide.shapes.title
        title = " ".join((title_shape.text_frame.text if title_shape is not None else "").split())
        where = Location(slide=number)
        if title:
            where["section"] = title
            blocks.append(Block("heading", budget.take(title), where))
        for shape in slide.shapes:
            if title_shape is not None and shape.shape_id == title_shape.shape_id:
                continue
            blocks += _shape_blocks(shape, where, budget)
        if slide.has_notes_slide:
            notes = slide.notes_slide.notes_text_frame
            if notes is not None and notes.text.strip():
                blocks.append(Block("text", budget.take(notes.text.strip()), where))
    return Extracted(blocks, pages=max(1, count))


def _shape_blocks(shape: Any, where: Location, budget: Budget) -> list[Block]:
    blocks: list[Block] = []
    if getattr(shape, "has_table", False) and shape.has_table:
        header: str | None = None
        for row in shape.table.rows:
            cells = [cell.text for cell in row.cells]
            if any(c.strip() for c in cells):
                line = budget.take(table_row(cells))
                blocks.append(Block("row", line, where, header=header))
                header = header or line
    elif getattr(shape, "has_text_frame", False) and shape.has_text_frame:
        lines = [p.text.strip() for p in shape.text_frame.paragraphs if p.text.strip()]
        if len(lines) > 1:
            blocks.append(Block("list", budget.take("\n".join(f"- {x}" for x in lines)), where))
        elif lines:
            blocks.append(Block("text", budget.take(lines[0]), where))
    elif shape.shape_type is not None and hasattr(shape, "shapes"):  # a group
        for inner in shape.shapes:
            blocks += _shape_blocks(inner, where, budget)
    return blocks
