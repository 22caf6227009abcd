from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import CheckConstraint, DateTime, ForeignKeyConstraint, Index, Text, func
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base, Timestamped

FEEDBACK_VALUES = ("up", "down")
COMMENT_MAX = 2000


class TurnFeedback(Timestamped, Base):
    """A user's thumbs up or down on one of their turns, with an optional comment. One per
    turn: changing one's mind replaces it. It goes with its turn and with its user (ON DELETE
    CASCADE), so deleting a conversation or erasing the user leaves none behind."""

    __tablename__ = "turn_feedback"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "turn_id"],
            ["query_history.tenant_id", "query_history.id"],
            ondelete="CASCADE",
        ),
        ForeignKeyConstraint(
            ["tenant_id", "user_id"], ["users.tenant_id", "users.id"], ondelete="CASCADE"
        ),
        CheckConstraint("value IN ('up', 'down')", name="value"),
        CheckConstraint(f"char_length(comment) <= {COMMENT_MAX}", name="comment_length"),
        Index("ix_turn_feedback_user", "tenant_id", "user_id"),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    turn_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    user_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))
    value: Mapped[str] = mapped_column(Text)
    comment: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.clock_timestamp()
    )
