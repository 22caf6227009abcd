from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import DateTime, ForeignKeyConstraint, Index, Integer, Text, func
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base, TenantOwned, Timestamped


class ChatSession(TenantOwned, Timestamped, Base):
    """A conversation, owned by one user of one tenant. Its id is the LangGraph thread id."""

    __tablename__ = "chat_sessions"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "user_id"], ["users.tenant_id", "users.id"], ondelete="CASCADE"
        ),
        Index("ix_chat_sessions_owner_created", "tenant_id", "user_id", "created_at", "id"),
    )

    user_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))
    title: Mapped[str] = mapped_column(Text, default="New conversation")
    summary: Mapped[str | None] = mapped_column(Text)
    """Progressive summary of the turns that no longer fit the context budget."""
    summarized_turns: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    summary_claimed_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    """Set while a background job folds turns into the summary (one job at a time)."""
    pinned_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    """When the user pinned it (NULL: not pinned); pinned conversations are listed first."""
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True),
        server_default=func.clock_timestamp(),
        onupdate=func.clock_timestamp(),
    )

    @property
    def pinned(self) -> bool:
        """Whether the user pinned it (the API's view of `pinned_at`)."""
        return self.pinned_at is not None
