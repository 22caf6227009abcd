"""One reader per content type: a file's bytes in, its blocks out."""

from __future__ import annotations

from app.core.errors import UnsupportedMediaType
from app.ingestion.formats import (
    delimited,
    epub,
    html,
    mail,
    markdown,
    opendocument,
    pdf,
    slides,
    spreadsheet,
    structured,
    word,
)
from app.ingestion.formats.base import Budget, Extracted, ExtractionError, strip_control
from app.ingestion.formats.sniff import sniff
from app.ingestion.formats.types import (
    CSV,
    DOCX,
    EML,
    EPUB,
    HTML,
    JSON,
    MARKDOWN,
    ODT,
    PDF,
    PPTX,
    TEXT,
    XLSX,
)


def extract(
    data: bytes, content_type: str, *, max_chars: int | None = None, max_pages: int | None = None
) -> Extracted:
    """The blocks of a file of `content_type`. More than `max_chars` characters of text or
    `max_pages` PDF pages is an `ExtractionError`, found while reading."""
    budget = Budget(max_chars)
    if content_type == PDF:
        return pdf.read(data, budget, max_pages)
    if content_type == DOCX:
        return word.read(data, budget)
    if content_type == PPTX:
        return slides.read(data, budget)
    if content_type == XLSX:
        return spreadsheet.read(data, budget)
    if content_type == EPUB:
        return epub.read(data, budget)
    if content_type == ODT:
        return opendocument.read(data, budget)
    if content_type == EML:
        return mail.read(data, budget, _attached)
    try:
        text = strip_control(data.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise ExtractionError("The file is not UTF-8 text.") from exc
    return _text(text, content_type, budget)


def _text(text: str, content_type: str, budget: Budget) -> Extracted:
    if content_type == MARKDOWN:
        return markdown.read(text, budget)
    if content_type == HTML:
        return html.read(text, budget)
    if content_type == CSV:
        return delimited.read(text, budget)
    if content_type == JSON:
        return structured.read(text, budget)
    if content_type == TEXT:
        return markdown.read_plain(text, budget)
    raise ExtractionError(f"Files of type {content_type} are not read.")


def _attached(data: bytes, budget: Budget, depth: int) -> Extracted:
    """A mail's body or text attachment, read as whatever text format it is (a nested
    message as a message); an attachment that is not text is skipped."""
    try:
        kind = sniff(data).content_type
    except UnsupportedMediaType:
        return Extracted([])
    if kind == EML:
        return mail.read(data, budget, _attached, depth)
    if kind not in (MARKDOWN, TEXT, CSV, HTML, JSON):
        return Extracted([])
    return _text(strip_control(data.decode("utf-8-sig")), kind, budget)
