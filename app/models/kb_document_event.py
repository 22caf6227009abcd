from __future__ import annotations

import uuid

from sqlalchemy import ForeignKeyConstraint, Index, Text
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base, TenantOwned, Timestamped


class KbDocumentEvent(TenantOwned, Timestamped, Base):
    """One status a knowledge-base document entered, written by the statement that changed
    its status (ADR 0088): the admin's document view shows them as its history. They go
    with their document (ON DELETE CASCADE)."""

    __tablename__ = "kb_document_events"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "document_id"],
            ["kb_documents.tenant_id", "kb_documents.id"],
            ondelete="CASCADE",
        ),
        Index("ix_kb_document_events_document", "tenant_id", "document_id", "created_at"),
    )

    document_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))
    status: Mapped[str] = mapped_column(Text)
    detail: Mapped[str | None] = mapped_column(Text)
    """The error, or a short note: the attempt, the chunk count, why it was queued again."""
