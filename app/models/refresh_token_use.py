from __future__ import annotations

import uuid

from sqlalchemy import ForeignKeyConstraint, Text
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base, Timestamped


class RefreshTokenUse(Timestamped, Base):
    """A refresh token that was exchanged. Its `jti` is the key: a second use is a replay."""

    __tablename__ = "refresh_token_uses"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "family_id"],
            ["refresh_token_families.tenant_id", "refresh_token_families.id"],
            ondelete="CASCADE",
            name="fk_refresh_token_uses_family",  # the conventional name exceeds 63 characters
        ),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    jti: Mapped[str] = mapped_column(Text, primary_key=True)
    family_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))
