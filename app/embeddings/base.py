"""The embedder interface: a name, a dimension, and batches of texts in, unit vectors out."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol


class Embedder(Protocol):
    """Turns batches of texts into unit vectors; every embedding model implements this."""

    name: str
    """Identifies the model; recorded in the database beside the vectors it produced."""
    dimension: int
    max_input_tokens: int | None
    """The longest text (in cl100k tokens) the model reads whole; longer input is cut by the
    model, so chunks are made no longer than this. None: no limit."""

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalised vector per text, in order."""
        ...


def prefetch(embedder: Embedder, texts: Sequence[str]) -> None:
    """Start embedding queries a turn will ask for shortly, where the embedder remembers its
    queries (the local model); elsewhere nothing, since an API embedder would be paid twice."""
    start = getattr(embedder, "prefetch", None)
    if callable(start):
        start(texts)


class EmbedderConfigError(RuntimeError):
    """The configured embedder cannot be built (missing extra or key, wrong dimension)."""


_SEPARATORS = re.compile(r"[._\-]+")


def attachment_title(filename: str | None) -> str:
    """An attachment's title for the indexes: its file name with `.`, `_` and `-` as spaces
    (PostgreSQL's parser reads `refund-policy.pdf` as one file-name token, not two words).
    Migration 0019 applies the same rule to the chunks it re-indexes."""
    return _SEPARATORS.sub(" ", filename or "").strip()


def document_input(title: str, text: str) -> str:
    """What the embedder reads for a chunk: the title on its own line, then the text.

    The embedders here (all-MiniLM-L6-v2, hashing, OpenAI) take no instruction prefix, so
    the title is simply the passage's first line; a model trained with one (e5's
    "passage: ", bge's query instruction) would add it here and in `query_input`."""
    return f"{title}\n\n{text}" if title else text


def query_input(query: str) -> str:
    """What the embedder reads for a search query (no prefix for the embedders here)."""
    return query
