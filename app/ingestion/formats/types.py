"""The content types Threadline reads, as it records them on a document."""

from __future__ import annotations

PDF = "application/pdf"
MARKDOWN = "text/markdown"
TEXT = "text/plain"
CSV = "text/csv"
HTML = "text/html"
JSON = "application/json"
EML = "message/rfc822"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
EPUB = "application/epub+zip"
ODT = "application/vnd.oasis.opendocument.text"

TEXT_TYPES = frozenset({MARKDOWN, TEXT, CSV, HTML, JSON, EML})
"""Read from UTF-8 text (the others are binary containers)."""
ACCEPTED = (
    "PDF, Word (.docx), PowerPoint (.pptx), Excel (.xlsx), OpenDocument text (.odt), EPUB, "
    "e-mail (.eml), HTML, CSV, JSON, Markdown and plain text"
)
"""What a 415 names as accepted."""
