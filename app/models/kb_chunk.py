from __future__ import annotations

import uuid

from sqlalchemy import ForeignKeyConstraint, Index
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base, TenantOwned, Timestamped
from app.models._chunk import ChunkColumns, search_indexes


class KbChunk(TenantOwned, ChunkColumns, Timestamped, Base):
    """A searchable piece of a knowledge-base document, with its embedding."""

    __tablename__ = "kb_chunks"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "document_id"],
            ["kb_documents.tenant_id", "kb_documents.id"],
            ondelete="CASCADE",
        ),
        Index("ix_kb_chunks_document", "tenant_id", "document_id", "ordinal"),
        Index("ix_kb_chunks_collection", "tenant_id", "collection_id"),
        *search_indexes("kb_chunks", full_text=False),
    )

    document_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))
    collection_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))
    """Its document's collection, copied by triggers (migration 0031) for the RLS policy."""
