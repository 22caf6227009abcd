from __future__ import annotations

import uuid
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import ForeignKey, Index, Text
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base, TenantOwned, Timestamped


class Faq(TenantOwned, Timestamped, Base):
    """A question/answer pair a tenant admin curated: close questions are answered from it
    without the model. FAQ lists are short, so matching scans the tenant's rows exactly."""

    __tablename__ = "faqs"
    __table_args__ = (Index("ix_faqs_tenant_created", "tenant_id", "created_at"),)

    tenant_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True
    )
    question: Mapped[str] = mapped_column(Text)
    answer: Mapped[str] = mapped_column(Text)
    # The dimension is fixed by the migration from THREADLINE_EMBEDDING_DIM.
    embedding: Mapped[Any] = mapped_column(Vector())
