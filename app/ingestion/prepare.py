"""The CPU half of ingestion, as one pure function: a file's bytes in, its chunks out.

Read the file's blocks (`app.ingestion.formats`), drop what PostgreSQL cannot store,
neutralise instruction-like text, anonymise personal data (attachments) and chunk,
keeping the structure and each chunk's location (`app.ingestion.structure`). Plain text
has no structure and is chunked as a whole. Nothing here does I/O or touches the event
loop, and arguments and result pickle, so `prepare` can run in a worker process
(`app.ingestion.offload`): on a 24 MB text it is seconds of CPU.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

from app.ingestion.chunking import Chunk, chunk_text
from app.ingestion.extract import TEXT, ExtractionError, extract, extract_text
from app.ingestion.formats.base import Block
from app.ingestion.safety import neutralise_instructions
from app.ingestion.structure import chunk_blocks
from app.pii.detect import anonymize


@dataclass(frozen=True)
class PrepareOptions:
    """How to prepare one document; the limits come from the settings."""

    content_type: str
    anonymise: bool
    chunk_tokens: int
    chunk_overlap: int
    max_chars: int
    """The longest extracted text accepted (characters)."""
    max_pages: int
    """The most pages a PDF may have."""
    keep_text: bool = False
    """Return the whole text too (an attachment stores it), not only the chunks."""
    cpu_seconds: float | None = None
    """The CPU budget of the document in a worker process (`app.ingestion.offload`)."""


@dataclass(frozen=True)
class Prepared:
    """A document made ready to embed: its chunks and what was cleaned out of its text."""

    text: str | None
    """The text the chunks were cut from (sanitised, anonymised if asked), if kept."""
    chunks: list[Chunk]
    pages: int
    injections: int
    """Instruction-like passages neutralised."""
    pii: dict[str, int] = field(default_factory=dict)
    """Personal data replaced, by kind."""


class PrepareError(Exception):
    """A permanent failure, with a message for the document's `error`: retrying is useless."""


def prepare(source: bytes, options: PrepareOptions) -> Prepared:
    """Extract, sanitise and chunk `source`; raises `PrepareError` for a file that cannot be
    ingested (unreadable, over a limit, no text)."""
    if options.content_type == TEXT:
        return _prepare_plain(source, options)
    try:
        extracted = extract(
            source, options.content_type, max_chars=options.max_chars, max_pages=options.max_pages
        )
    except ExtractionError as exc:
        raise PrepareError(str(exc)) from exc
    injections = 0
    pii: Counter[str] = Counter()

    def clean(text: str) -> str:
        nonlocal injections
        sanitised = neutralise_instructions(text)
        injections += sanitised.injections
        if not options.anonymise:
            return sanitised.text
        anonymised = anonymize(sanitised.text)
        pii.update(anonymised.found)
        return anonymised.text

    blocks: list[Block] = []
    headers: dict[str, str] = {}  # a table's header row, cleaned once for all its rows
    for block in extracted.blocks:
        header = block.header
        if header is not None:
            header = (
                headers[header] if header in headers else headers.setdefault(header, clean(header))
            )
        blocks.append(replace(block, text=clean(block.text), header=header))
    pages = extracted.pages
    del extracted
    chunks = chunk_blocks(
        blocks, max_tokens=options.chunk_tokens, overlap_tokens=options.chunk_overlap
    )
    if not chunks:
        raise PrepareError("The document contains no text.")
    kept = "\n\n".join(block.text for block in blocks) if options.keep_text else None
    return Prepared(kept, chunks, pages, injections, dict(pii))


def _prepare_plain(source: bytes, options: PrepareOptions) -> Prepared:
    try:
        raw, pages = extract_text(
            source, options.content_type, max_chars=options.max_chars, max_pages=options.max_pages
        )
    except ExtractionError as exc:
        raise PrepareError(str(exc)) from exc
    sanitised = neutralise_instructions(raw)
    del raw  # a 24 MB document: one copy of its text at a time
    text, pii = sanitised.text, {}
    if options.anonymise:
        anonymised = anonymize(text)
        text, pii = anonymised.text, dict(anonymised.found)
    chunks = chunk_text(text, max_tokens=options.chunk_tokens, overlap_tokens=options.chunk_overlap)
    if not chunks:
        raise PrepareError("The document contains no text.")
    kept = text if options.keep_text else None
    return Prepared(kept, chunks, pages, sanitised.injections, pii)
