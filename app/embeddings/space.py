"""The database remembers which model filled its vectors; a different one is refused at
start-up instead of silently mixing incomparable vectors."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from app.embeddings.base import Embedder
from app.embeddings.repository import record_space, vector_column_dimension

SPACE = "default"


class EmbeddingMismatchError(RuntimeError):
    """The configured embedder differs from the one that filled this database."""


async def check_embedding_space(db: AsyncSession, embedder: Embedder) -> None:
    """Record the embedder on first use; refuse a different model or dimension later."""
    column = await vector_column_dimension(db)
    if column is not None and column != embedder.dimension:
        raise EmbeddingMismatchError(
            f"the vector columns hold {column} dimensions but {embedder.name} produces "
            f"{embedder.dimension}: set THREADLINE_EMBEDDER back, or run "
            "`threadline reindex` to re-embed everything with the new model"
        )
    recorded = await record_space(db, SPACE, embedder.name, embedder.dimension)
    if (recorded.model, recorded.dimension) != (embedder.name, embedder.dimension):
        raise EmbeddingMismatchError(
            f"this database's vectors were made by {recorded.model} ({recorded.dimension} "
            f"dimensions), not {embedder.name} ({embedder.dimension}): set THREADLINE_EMBEDDER "
            "back, or run `threadline reindex` to re-embed everything with the new one"
        )
