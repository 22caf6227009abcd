"""Columns shared by the two chunk tables: title, text, tokens, embedding, full-text vector."""

from __future__ import annotations

from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import Computed, Index, Integer, Text
from sqlalchemy.dialects.postgresql import JSONB, REGCONFIG, TSVECTOR
from sqlalchemy.orm import Mapped, mapped_column

# The title (of the document, or an attachment's file name) weighs 'A', the text 'B': BM25
# counts a title word more (app/retrieval/repository.py), ts_rank_cd weighs it 1.0 to 0.4.
# Both are analysed with the chunk's own text-search configuration (migration 0030).
TSV_EXPRESSION = (
    "setweight(to_tsvector(language, title), 'A') || setweight(to_tsvector(language, text), 'B')"
)


class ChunkColumns:
    """Mixin of the columns both chunk tables share: text, tokens, embedding, full-text vector."""

    ordinal: Mapped[int] = mapped_column(Integer)
    title: Mapped[str] = mapped_column(Text, default="")
    """The parent's title, indexed with each chunk (migration 0019)."""
    text: Mapped[str] = mapped_column(Text)
    token_count: Mapped[int] = mapped_column(Integer, default=0)
    language: Mapped[str] = mapped_column(REGCONFIG)
    """The text-search configuration `tsv` was analysed with; left out of an INSERT, a
    trigger fills it: the document's own, else the tenant's (migration 0030, ADR 0076)."""
    # The dimension is fixed by the migration from THREADLINE_EMBEDDING_DIM.
    embedding: Mapped[Any] = mapped_column(Vector(), nullable=True)
    tsv: Mapped[Any] = mapped_column(TSVECTOR, Computed(TSV_EXPRESSION, persisted=True))
    location: Mapped[dict[str, Any] | None] = mapped_column(JSONB, nullable=True)
    """Where the chunk is in its document (`app.core.location`; migration 0029)."""


def search_indexes(table: str, *, full_text: bool = True) -> tuple[Index, ...]:
    """HNSW (cosine) for the dense leg; GIN for the full-text leg when `full_text` (the
    knowledge base's BM25 reads its own inverted index instead, migration 0021); the
    chunks' languages by tenant."""
    hnsw = Index(
        f"ix_{table}_embedding_hnsw",
        "embedding",
        postgresql_using="hnsw",
        postgresql_ops={"embedding": "vector_cosine_ops"},
        postgresql_with={"m": 16, "ef_construction": 64},
    )
    # The languages a tenant's chunks are in, and those a language switch still has to
    # re-analyse (migration 0030).
    language = Index(f"ix_{table}_language", "tenant_id", "language")
    if not full_text:
        return (hnsw, language)
    return (hnsw, language, Index(f"ix_{table}_tsv", "tsv", postgresql_using="gin"))
