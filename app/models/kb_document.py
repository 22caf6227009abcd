from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import (
    CheckConstraint,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Text,
    UniqueConstraint,
)
from sqlalchemy import text as sql_text
from sqlalchemy.dialects.postgresql import JSONB, REGCONFIG, UUID
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base, TenantOwned, Timestamped
from app.models._document import DOCUMENT_STATUS_CHECK, IN_FLIGHT, DocumentColumns


class KbDocument(TenantOwned, DocumentColumns, Timestamped, Base):
    """A knowledge-base document of a tenant, added by its admins."""

    __tablename__ = "kb_documents"
    __table_args__ = (
        UniqueConstraint("tenant_id", "content_hash"),
        CheckConstraint(DOCUMENT_STATUS_CHECK, name="status"),
        Index("ix_kb_documents_external_id", "tenant_id", "external_id"),
        ForeignKeyConstraint(
            ["tenant_id", "collection_id"],
            ["kb_collections.tenant_id", "kb_collections.id"],
            ondelete="CASCADE",
        ),
        Index("ix_kb_documents_collection", "tenant_id", "collection_id"),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True
    )
    title: Mapped[str] = mapped_column(Text)
    external_id: Mapped[str | None] = mapped_column(Text)
    doc_metadata: Mapped[dict[str, Any]] = mapped_column(
        "metadata", JSONB, default=dict, server_default="{}"
    )
    created_by: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    collection_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))
    """Its collection; left unset, the tenant's default one (a trigger, migration 0031)."""
    language: Mapped[str | None] = mapped_column(REGCONFIG)
    """The document's own text-search configuration; None: its tenant's (ADR 0076)."""


# The ingestion recovery scans only in-flight rows (migration 0017).
Index(
    "ix_kb_documents_in_flight", KbDocument.lease_expires_at, postgresql_where=sql_text(IN_FLIGHT)
)
# BM25 leaves out the chunks of documents being re-ingested: few rows (migration 0021).
Index(
    "ix_kb_documents_not_ready",
    KbDocument.tenant_id,
    postgresql_where=sql_text("status <> 'ready'"),
)
