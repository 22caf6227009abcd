from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import DateTime, ForeignKey, Text
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base, Timestamped


class SsoLoginAttempt(Timestamped, Base):
    """A sign-in sent to the tenant's provider and not yet come back (docs/adr/0081).

    Keyed by the SHA-256 of its `state`; deleted when the callback uses it, so a state, its
    nonce and its PKCE verifier serve one callback at most.
    """

    __tablename__ = "sso_login_attempts"

    tenant_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True
    )
    state_hash: Mapped[str] = mapped_column(Text, primary_key=True)
    browser_hash: Mapped[str] = mapped_column(Text)
    """SHA-256 of the browser-binding cookie set when the sign-in started."""
    nonce: Mapped[str] = mapped_column(Text)
    code_verifier: Mapped[str] = mapped_column(Text)
    issuer: Mapped[str] = mapped_column(Text)
    """The issuer the sign-in was sent to: a provider changed meanwhile does not count."""
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
