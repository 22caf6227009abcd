from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import Boolean, DateTime, ForeignKey, Text, func, true
from sqlalchemy.dialects.postgresql import ARRAY, UUID
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base, Timestamped


class SsoProvider(Timestamped, Base):
    """A tenant's OpenID Connect provider (at most one), set by its admins (docs/adr/0081).

    The client secret is stored encrypted (`app/sso/secrets.py`) and never returned.
    """

    __tablename__ = "sso_providers"

    tenant_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True
    )
    display_name: Mapped[str] = mapped_column(Text)
    """What the sign-in page's button says: "Sign in with <display_name>"."""
    issuer: Mapped[str] = mapped_column(Text)
    client_id: Mapped[str] = mapped_column(Text)
    client_secret_encrypted: Mapped[str] = mapped_column(Text)
    allowed_domains: Mapped[list[str]] = mapped_column(ARRAY(Text))
    """E-mail domains (lower-case) whose users may sign in through this provider."""
    scopes: Mapped[str] = mapped_column(Text, server_default="openid email profile")
    groups_claim: Mapped[str | None] = mapped_column(Text)
    """The ID token claim listing the user's groups (None: groups are not read)."""
    enabled: Mapped[bool] = mapped_column(Boolean, server_default=true())
    password_login: Mapped[bool] = mapped_column(Boolean, server_default=true())
    """False: the tenant's users may not sign in with a password (only through SSO)."""
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True),
        server_default=func.clock_timestamp(),
        onupdate=func.clock_timestamp(),
    )
