from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    CheckConstraint,
    DateTime,
    ForeignKeyConstraint,
    Index,
    Integer,
    SmallInteger,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, UUID
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base, TenantOwned, Timestamped

TURN_STATUSES = ("pending", "complete", "incomplete", "failed")


class QueryHistory(TenantOwned, Timestamped, Base):
    """One chat turn: the user's query, the answer, and how its context was built."""

    __tablename__ = "query_history"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "session_id"],
            ["chat_sessions.tenant_id", "chat_sessions.id"],
            ondelete="CASCADE",
        ),
        ForeignKeyConstraint(
            ["tenant_id", "user_id"], ["users.tenant_id", "users.id"], ondelete="CASCADE"
        ),
        CheckConstraint("status IN ('pending', 'complete', 'incomplete', 'failed')", name="status"),
        CheckConstraint(
            "query_composition IS NULL OR "
            "query_composition IN ('pure_kb', 'pure_doc', 'hybrid', 'chat')",
            name="query_composition",
        ),
        Index("ix_query_history_session_created", "tenant_id", "session_id", "created_at"),
        Index("ix_query_history_tenant_created", "tenant_id", "created_at", "id"),
        Index("ix_query_history_user_created", "tenant_id", "user_id", "created_at"),
        # A retry whose key Redis forgot finds its turn by the key (ADR 0069).
        Index(
            "ix_query_history_idempotency_key",
            "tenant_id",
            "user_id",
            text("split_part(idempotency_key, chr(10), 1)"),
            postgresql_where=text("idempotency_key IS NOT NULL"),
        ),
        Index(
            "ix_query_history_pending_lease",
            "lease_expires_at",
            postgresql_where=text("status = 'pending'"),
        ),
    )

    session_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))
    user_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))
    user_query: Mapped[str] = mapped_column(Text)
    answer: Mapped[str] = mapped_column(Text, default="", server_default="")
    status: Mapped[str] = mapped_column(Text, default="pending")
    query_composition: Mapped[str | None] = mapped_column(Text)
    context_metadata: Mapped[dict[str, Any]] = mapped_column(
        JSONB, default=dict, server_default="{}"
    )
    manifest_version: Mapped[int | None] = mapped_column(SmallInteger)
    """The version of `context_metadata`'s schema (NULL: written before it had one, read as
    version 1; app/conversation/turn/manifest.py)."""
    attachment_ids: Mapped[list[uuid.UUID]] = mapped_column(
        ARRAY(UUID(as_uuid=True)), default=list, server_default="{}"
    )
    model: Mapped[str | None] = mapped_column(Text)
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    latency_ms: Mapped[int | None] = mapped_column(Integer)
    idempotency_key: Mapped[str | None] = mapped_column(Text)
    """The Redis key of the turn's idempotency claim and the request's fingerprint (one per
    line), so whoever finishes an orphaned turn can store its answer under the key."""
    lease_owner: Mapped[str | None] = mapped_column(Text)
    """The API process running the turn (while it is pending)."""
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    """Renewed by the owner while the turn runs; a pending turn past it is an orphan."""
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
