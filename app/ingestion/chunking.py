"""Token-aware chunking with overlap, cutting at paragraph and sentence boundaries."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from app.core.location import Location
from app.llm.tokens import count_tokens, truncate_to_tokens

_PARAGRAPHS = re.compile(r"\n\s*\n")
_SENTENCES = re.compile(r"(?<=[.!?])\s+")
_BLANK_LINES = re.compile(r"\n{2,}")


@dataclass(frozen=True)
class Chunk:
    """One piece of a document's text, its position and its token count."""

    ordinal: int
    text: str
    tokens: int
    location: Location = field(default_factory=Location)
    """Where the chunk is in its document (`app.ingestion.structure`); {} for plain text."""


def prose_units(text: str, max_tokens: int) -> list[str]:
    """Paragraphs; a paragraph too long is split into sentences; a sentence too long is cut."""
    units: list[str] = []
    for paragraph in _PARAGRAPHS.split(text):
        # Spaces collapsed, line breaks kept: a heading line (a PDF's, a Markdown one without
        # a blank line after it) stays apart from the sentence after it (ADR 0077).
        paragraph = "\n".join(" ".join(line.split()) for line in paragraph.splitlines())
        paragraph = _BLANK_LINES.sub("\n", paragraph).strip()
        if not paragraph:
            continue
        if count_tokens(paragraph) <= max_tokens:
            units.append(paragraph)
            continue
        for sentence in _SENTENCES.split(paragraph):
            while count_tokens(sentence) > max_tokens:
                head = truncate_to_tokens(sentence, max_tokens)
                units.append(head)
                sentence = sentence[len(head) :].strip()
            if sentence:
                units.append(sentence)
    return units


def chunk_text(text: str, *, max_tokens: int = 400, overlap_tokens: int = 60) -> list[Chunk]:
    """Chunks of at most `max_tokens`, each starting with up to `overlap_tokens` of the end of
    the previous one, so a fact that straddles a boundary is whole in one of them."""
    chunks: list[Chunk] = []
    current: list[str] = []
    size = 0
    for unit in prose_units(text, max_tokens):
        tokens = count_tokens(unit)
        if current and size + tokens > max_tokens:
            chunks.append(_chunk(len(chunks), current))
            carried: list[str] = []
            carried_size = 0
            for previous in reversed(current):  # whole units from the end, within the overlap
                cost = count_tokens(previous)
                if (
                    carried_size + cost > overlap_tokens
                    or carried_size + cost + tokens > max_tokens
                ):
                    break
                carried.insert(0, previous)
                carried_size += cost
            current, size = carried, carried_size
        current.append(unit)
        size += tokens
    if current:
        chunks.append(_chunk(len(chunks), current))
    return chunks


def _chunk(ordinal: int, units: list[str]) -> Chunk:
    text = "\n".join(units)
    return Chunk(ordinal=ordinal, text=text, tokens=count_tokens(text))
