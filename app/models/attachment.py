from __future__ import annotations

import uuid

from sqlalchemy import CheckConstraint, ForeignKeyConstraint, Index, Text, UniqueConstraint
from sqlalchemy import text as sql_text
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base, TenantOwned, Timestamped
from app.models._document import DOCUMENT_STATUS_CHECK, IN_FLIGHT, DocumentColumns


class Attachment(TenantOwned, DocumentColumns, Timestamped, Base):
    """A document a user uploaded into their conversations."""

    __tablename__ = "attachments"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "user_id"], ["users.tenant_id", "users.id"], ondelete="CASCADE"
        ),
        CheckConstraint(DOCUMENT_STATUS_CHECK, name="status"),
        # One per owner and content: a second upload of the same file is the first one.
        UniqueConstraint("tenant_id", "user_id", "content_hash"),
    )

    user_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))
    text: Mapped[str | None] = mapped_column(Text, deferred=True)
    """Extracted, sanitised text (deferred: up to `max_document_chars`, read by its column
    where it is needed, never with a row shown in a listing)."""


# The ingestion recovery scans only in-flight rows (migration 0017).
Index("ix_attachments_in_flight", Attachment.lease_expires_at, postgresql_where=sql_text(IN_FLIGHT))
