"""A deterministic, dependency-free embedder: hashed word and word-pair features.

No model to download, identical on every machine, fast — the zero-install default and the
tests' embedder. It captures lexical overlap, not meaning: semantic search wants `minilm` or
`openai`.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import math
import re
from collections.abc import Sequence

_TOKEN = re.compile(r"[a-z0-9]+")
INLINE_TEXTS = 4


class HashingEmbedder:
    """A model-free embedder hashing words and word pairs: fast and deterministic (tests, demos)."""

    name = "hashing-v1"
    max_input_tokens: int | None = None

    def __init__(self, dimension: int = 384) -> None:
        self.dimension = dimension

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * self.dimension
        words = _TOKEN.findall(text.lower())
        features = words + [f"{a} {b}" for a, b in itertools.pairwise(words)]
        for feature in features:
            digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
            index = int.from_bytes(digest[:4], "little") % self.dimension
            sign = 1.0 if digest[4] & 1 else -1.0
            vector[index] += sign
        norm = math.sqrt(sum(v * v for v in vector))
        if norm == 0:
            vector[0] = 1.0  # an empty text still gets a valid unit vector
            return vector
        return [v / norm for v in vector]

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector per text; large batches are hashed in a worker thread."""
        if len(texts) <= INLINE_TEXTS:  # a query: cheaper than a hop to a thread
            return [self._vector(text) for text in texts]
        # An ingestion batch is tens of milliseconds of CPU: in a thread, the event loop
        # gets the interpreter back every switch interval instead of waiting for the batch.
        return await asyncio.to_thread(lambda: [self._vector(text) for text in texts])
