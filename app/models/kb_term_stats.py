from __future__ import annotations

import uuid

from sqlalchemy import BigInteger, Integer, PrimaryKeyConstraint, SmallInteger, Text
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base


class KbTermStats(Base):
    """Per tenant, how many knowledge-base chunks contain each lexeme (BM25's df).
    Maintained by triggers on kb_chunks (migration 0010)."""

    __tablename__ = "kb_term_stats"

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    lexeme: Mapped[str] = mapped_column(Text, primary_key=True)
    df: Mapped[int] = mapped_column(Integer)


class KbCorpusStats(Base):
    """Per tenant, the number of chunks and their summed lexeme counts (BM25's N and avgdl)."""

    __tablename__ = "kb_corpus_stats"

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    chunks: Mapped[int] = mapped_column(BigInteger)
    total_length: Mapped[int] = mapped_column(BigInteger)


class KbTermPosting(Base):
    """Per tenant, each knowledge-base chunk's frequency of each of its lexemes: the inverted
    index BM25 reads (migration 0021), kept by triggers on kb_chunks. `title_tf`: how many of
    those occurrences are in the title (weight 'A'); `chunk_length`: the chunk's lexemes."""

    __tablename__ = "kb_term_postings"
    __table_args__ = (
        PrimaryKeyConstraint(
            "tenant_id",
            "lexeme",
            "chunk_id",
            name="pk_kb_term_postings",
            postgresql_include=["document_id", "tf", "title_tf", "chunk_length"],
        ),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))
    lexeme: Mapped[str] = mapped_column(Text)
    chunk_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))
    document_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))
    tf: Mapped[int] = mapped_column(SmallInteger)
    title_tf: Mapped[int] = mapped_column(SmallInteger)
    chunk_length: Mapped[int] = mapped_column(Integer)
