"""OpenAI embeddings (or any OpenAI-compatible embeddings endpoint)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from openai import AsyncOpenAI


class OpenAIEmbedder:
    """Embeddings from the OpenAI API or any compatible endpoint."""

    def __init__(
        self, *, model: str, dimension: int, api_key: str, base_url: str | None = None
    ) -> None:
        self.name = f"openai/{model}"
        self.dimension = dimension
        self.max_input_tokens: int | None = 8_000  # the API's limit is 8,191 tokens
        self._model = model
        self._client = AsyncOpenAI(api_key=api_key, base_url=base_url)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector per text from one API call, in input order."""
        response = await self._client.embeddings.create(
            model=self._model, input=list(texts), dimensions=self.dimension
        )
        vectors = [item.embedding for item in sorted(response.data, key=lambda d: d.index)]
        return [_normalise(v) for v in vectors]


def _normalise(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]
