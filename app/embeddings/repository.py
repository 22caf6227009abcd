"""SQL for the embedding space: the vector columns' dimension and the model on record."""

from __future__ import annotations

from sqlalchemy import select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import EmbeddingSpace


async def vector_column_dimension(db: AsyncSession) -> int | None:
    """The dimension the knowledge base's vector column was migrated with, if it exists."""
    dimension = await db.scalar(
        text(
            "SELECT atttypmod FROM pg_attribute "
            "WHERE attrelid = 'kb_chunks'::regclass AND attname = 'embedding'"
        )
    )
    return None if dimension is None else int(dimension)


async def record_space(db: AsyncSession, name: str, model: str, dimension: int) -> EmbeddingSpace:
    """Record the space's model and dimension unless one is recorded; the record either way."""
    await db.execute(
        pg_insert(EmbeddingSpace)
        .values(name=name, model=model, dimension=dimension)
        .on_conflict_do_nothing()
    )
    recorded = await db.scalar(select(EmbeddingSpace).where(EmbeddingSpace.name == name))
    assert recorded is not None
    return recorded
