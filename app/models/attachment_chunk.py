from __future__ import annotations

import uuid

from sqlalchemy import ForeignKeyConstraint, Index
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base, TenantOwned, Timestamped
from app.models._chunk import ChunkColumns, search_indexes


class AttachmentChunk(TenantOwned, ChunkColumns, Timestamped, Base):
    """A searchable piece of an attachment's text, with its embedding."""

    __tablename__ = "attachment_chunks"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "attachment_id"],
            ["attachments.tenant_id", "attachments.id"],
            ondelete="CASCADE",
        ),
        Index("ix_attachment_chunks_attachment", "tenant_id", "attachment_id", "ordinal"),
        *search_indexes("attachment_chunks"),
    )

    attachment_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))
