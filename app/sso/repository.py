"""SQL of single sign-on: the tenant's provider and its sign-ins under way."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import SsoLoginAttempt, SsoProvider


class SsoProviderRepository:
    """The tenant's OpenID provider (at most one)."""

    def __init__(self, db: AsyncSession, tenant_id: uuid.UUID) -> None:
        self.db = db
        self.tenant_id = tenant_id

    async def get(self, *, lock: bool = False) -> SsoProvider | None:
        """The provider, or None; locked until the transaction ends when `lock`."""
        statement = select(SsoProvider).where(SsoProvider.tenant_id == self.tenant_id)
        if lock:
            statement = statement.with_for_update()
        return (await self.db.execute(statement)).scalar_one_or_none()

    async def add(self, provider: SsoProvider) -> None:
        """Insert the tenant's provider."""
        if provider.tenant_id != self.tenant_id:
            raise ValueError("provider belongs to another tenant")
        self.db.add(provider)
        await self.db.flush()

    async def remove(self) -> None:
        """Delete the tenant's provider and its sign-ins under way."""
        for model in (SsoLoginAttempt, SsoProvider):
            await self.db.execute(delete(model).where(model.tenant_id == self.tenant_id))


class LoginAttemptRepository:
    """Sign-ins sent to the tenant's provider, each usable by one callback."""

    def __init__(self, db: AsyncSession, tenant_id: uuid.UUID) -> None:
        self.db = db
        self.tenant_id = tenant_id

    async def add(self, attempt: SsoLoginAttempt) -> None:
        """Store a new attempt, and drop the tenant's expired ones (abandoned sign-ins)."""
        await self.db.execute(
            delete(SsoLoginAttempt).where(
                SsoLoginAttempt.tenant_id == self.tenant_id,
                SsoLoginAttempt.expires_at < datetime.now(UTC),
            )
        )
        self.db.add(attempt)
        await self.db.flush()

    async def take(self, state_hash: str) -> SsoLoginAttempt | None:
        """Delete the live attempt with this state and return it: of two callbacks with one
        state, exactly one gets it. None when there is none (used, expired, or never made)."""
        statement = (
            delete(SsoLoginAttempt)
            .where(
                SsoLoginAttempt.tenant_id == self.tenant_id,
                SsoLoginAttempt.state_hash == state_hash,
            )
            .returning(SsoLoginAttempt)
        )
        attempt = (await self.db.execute(statement)).scalar_one_or_none()
        if attempt is None or attempt.expires_at <= datetime.now(UTC):
            return None
        return attempt
