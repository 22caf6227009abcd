"""One reader per content type: a file's bytes in, its blocks out."""

from __future__ import annotations

from collections.abc import Callable

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

# The readers of containers (bytes) and of text formats (decoded UTF-8), by content type.
_CONTAINERS: dict[str, Callable[[bytes, Budget], Extracted]] = {
    DOCX: word.read,
    PPTX: slides.read,
    XLSX: spreadsheet.read,
    EPUB: epub.read,
    ODT: opendocument.read,
}
_TEXTS: dict[str, Callable[[str, Budget], Extracted]] = {
    MARKDOWN: markdown.read,
    HTML: html.read,
    CSV: delimited.read,
    JSON: structured.read,
    TEXT: markdown.read_plain,
}


def extract(
    data: bytes, content_type: str, *, max_chars: int | None = None, max_pages: int | None = None
) -> Extracted:
    """The blocks of a file of `content_type`. More than `max_chars` characters of text or
    `max_pages` PDF pages is an `ExtractionError`, found while reading."""
    budget = Budget(max_chars)
    if content_type == PDF:
        return pdf.read(data, budget, max_pages)
    if content_type == EML:
        return mail.read(data, budget, _attached)
    container = _CONTAINERS.get(content_type)
    if container is not None:
        return container(data, budget)
    try:
        text = strip_control(data.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise ExtractionError("The file is not UTF-8 text.") from exc
    return _text(text, content_type, budget)


def _text(text: str, content_type: str, budget: Budget) -> Extracted:
    reader = _TEXTS.get(content_type)
    if reader is None:
        raise ExtractionError(f"Files of type {content_type} are not read.")
    return reader(text, budget)


def _attached(data: bytes, budget: Budget, depth: int) -> Extracted:
    """A mail's body or text attachment, read as whatever text format it is (a nested
    message as a message); an attachment that is not text is skipped."""
    try:
        kind = sniff(data).content_type
    except UnsupportedMediaType:
        return Extracted([])
    if kind == EML:
        return mail.read(data, budget, _attached, depth)
    if kind not in _TEXTS:
        return Extracted([])
    return _text(strip_control(data.decode("utf-8-sig")), kind, budget)
