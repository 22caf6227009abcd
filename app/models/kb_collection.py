from __future__ import annotations

import uuid

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    Float,
    ForeignKey,
    Index,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base, TenantOwned, Timestamped


class KbCollection(TenantOwned, Timestamped, Base):
    """A set of knowledge-base documents, visible to the whole tenant or to chosen groups."""

    __tablename__ = "kb_collections"
    __table_args__ = (
        UniqueConstraint("tenant_id", "name"),
        CheckConstraint("visibility IN ('tenant', 'groups')", name="visibility"),
        CheckConstraint("status IN ('active', 'deleting')", name="status"),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True
    )
    name: Mapped[str] = mapped_column(Text)
    visibility: Mapped[str] = mapped_column(Text, default="tenant", server_default="tenant")
    """`tenant`: every user of the tenant; `groups`: members of `kb_collection_groups`."""
    is_default: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    status: Mapped[str] = mapped_column(Text, default="active", server_default="active")
    """`deleting` while the background job removes its documents."""
    deletion_progress: Mapped[float] = mapped_column(Float, default=0.0, server_default="0")


# One default collection a tenant (migration 0031).
Index(
    "ix_kb_collections_default",
    KbCollection.tenant_id,
    unique=True,
    postgresql_where=KbCollection.is_default,
)
