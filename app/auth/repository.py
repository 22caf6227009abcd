"""SQL for users and API keys.

Two look-ups happen before the tenant is known (login by e-mail, API key by hash). Each opens
one read-only door in row-level security through its own transaction-local setting, and
closes it again; nothing else ever reads across tenants.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.db import API_KEY_HASH, LOGIN_EMAIL, set_scope
from app.core.repository import TenantRepository
from app.models import ApiKey, User


class UserRepository(TenantRepository[User]):
    model = User

    async def by_email(self, email: str) -> User | None:
        result = await self.session.execute(self.scoped().where(User.email == email))
        return result.scalar_one_or_none()


class ApiKeyRepository(TenantRepository[ApiKey]):
    model = ApiKey

    async def list(self) -> list[ApiKey]:
        result = await self.session.execute(self.scoped().order_by(ApiKey.created_at.desc()))
        return list(result.scalars())


async def find_login_candidates(session: AsyncSession, email: str) -> list[User]:
    """Users with this e-mail in any tenant (the `users_login` policy)."""
    await set_scope(session, {LOGIN_EMAIL: email})
    try:
        result = await session.execute(select(User).where(User.email == email).limit(20))
        return list(result.scalars())
    finally:
        await set_scope(session, {LOGIN_EMAIL: None})


async def find_api_key(session: AsyncSession, key_hash: str) -> ApiKey | None:
    """The live key with this hash, whatever its tenant (the `api_keys_lookup` policy)."""
    await set_scope(session, {API_KEY_HASH: key_hash})
    try:
        result = await session.execute(
            select(ApiKey).where(ApiKey.key_hash == key_hash, ApiKey.revoked_at.is_(None))
        )
        return result.scalar_one_or_none()
    finally:
        await set_scope(session, {API_KEY_HASH: None})
