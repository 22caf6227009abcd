"""The embedder interface: a name, a dimension, and batches of texts in, unit vectors out."""

from __future__ import annotations

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


class EmbedderConfigError(RuntimeError):
    """The configured embedder cannot be built (missing extra or key, wrong dimension)."""
