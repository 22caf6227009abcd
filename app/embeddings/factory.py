"""The configured embedder (`THREADLINE_EMBEDDER`)."""

from __future__ import annotations

from app.config import Settings
from app.embeddings.base import Embedder, EmbedderConfigError
from app.embeddings.hashing import HashingEmbedder


def build_embedder(settings: Settings) -> Embedder:
    """The configured embedder, refused when its dimension is not `THREADLINE_EMBEDDING_DIM`
    (`app.bootstrap.open_ingestion` also checks it against the vectors already stored)."""
    if settings.embedder == "hashing":
        return HashingEmbedder(settings.embedding_dim)
    if settings.embedder == "onnx":
        from app.embeddings.onnx import OnnxMiniLMEmbedder

        embedder: Embedder = OnnxMiniLMEmbedder()
    elif settings.embedder == "minilm":
        from app.embeddings.minilm import MiniLMEmbedder

        embedder = MiniLMEmbedder()
    else:
        from app.embeddings.openai import OpenAIEmbedder

        if settings.openai_api_key is None:
            raise EmbedderConfigError("THREADLINE_EMBEDDER=openai needs OPENAI_API_KEY")
        embedder = OpenAIEmbedder(
            model=settings.embedding_model or "text-embedding-3-small",
            dimension=settings.embedding_dim,
            api_key=settings.openai_api_key.get_secret_value(),
            base_url=settings.openai_base_url,
        )
    if embedder.dimension != settings.embedding_dim:
        raise EmbedderConfigError(
            f"{embedder.name} produces {embedder.dimension}-dimensional vectors but "
            f"THREADLINE_EMBEDDING_DIM is {settings.embedding_dim}"
        )
    return embedder
