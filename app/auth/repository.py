"""SQL for users and API keys.

Two look-ups happen before the tenant is known (login by e-mail, API key by hash). Each opens
one read-only door in row-level security through its own transaction-local setting, and
closes it again; nothing else ever reads across tenants.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import bindparam, func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.db import API_KEY_HASH, LOGIN_EMAIL, lookup_scope
from app.core.pagination import Cursor
from app.core.repository import TenantRepository, containing
from app.models import (
    ApiKey,
    ChatSession,
    RefreshTokenFamily,
    RefreshTokenUse,
    SsoProvider,
    User,
)


class UserIdentity(NamedTuple):
    """What a request needs to know of its user."""

    id: uuid.UUID
    email: str
    role: str
    disabled: bool


# Built once: every authenticated request runs it, and building a statement costs more Python
# than running it (columns only, so no ORM object is made either).
_USER_WITH_FAMILY = (
    select(User.id, User.email, User.role, User.disabled_at, RefreshTokenFamily.revoked_at)
    .join(
        RefreshTokenFamily,
        (RefreshTokenFamily.tenant_id == User.tenant_id)
        & (RefreshTokenFamily.user_id == User.id)
        & (RefreshTokenFamily.id == bindparam("family")),
    )
    .where(User.tenant_id == bindparam("tenant"), User.id == bindparam("user"))
)


class UserRepository(TenantRepository[User]):
    """The tenant's users."""

    model = User

    async def with_family(
        self, user_id: uuid.UUID, family_id: uuid.UUID
    ) -> tuple[UserIdentity, datetime | None] | None:
        """Who the user is and the revocation time of the token family (None: live), in one
        query; None when the user or the family does not exist. Read on every request."""
        row = (
            await self.db.execute(
                _USER_WITH_FAMILY,
                {"tenant": self.tenant_id, "user": user_id, "family": family_id},
            )
        ).one_or_none()
        if row is None:
            return None
        identity = UserIdentity(row.id, row.email, row.role, row.disabled_at is not None)
        return identity, row.revoked_at

    async def by_email(self, email: str) -> User | None:
        """The tenant's user with this email, or None."""
        result = await self.db.execute(self.scoped().where(User.email == email))
        return result.scalar_one_or_none()

    def _conversations(self) -> Any:
        return (
            select(func.count())
            .select_from(ChatSession)
            .where(ChatSession.tenant_id == User.tenant_id, ChatSession.user_id == User.id)
            .correlate(User)
            .scalar_subquery()
        )

    async def page(
        self, *, contains: str | None, after_email: str | None, limit: int
    ) -> list[tuple[User, int]]:
        """Up to `limit` users by e-mail (after `after_email`), those whose e-mail contains
        `contains` only when given; each with their number of conversations."""
        statement = self.scoped().add_columns(self._conversations())
        if contains:
            statement = statement.where(User.email.ilike(containing(contains), escape="\\"))
        if after_email is not None:
            statement = statement.where(User.email > after_email)
        result = await self.db.execute(statement.order_by(User.email).limit(limit))
        return [(row[0], row[1]) for row in result]

    async def with_conversations(self, user_id: uuid.UUID) -> tuple[User, int] | None:
        """The tenant's user and their number of conversations, or None."""
        statement = self.scoped().add_columns(self._conversations()).where(User.id == user_id)
        row = (await self.db.execute(statement)).one_or_none()
        return None if row is None else (row[0], row[1])


class ApiKeyRepository(TenantRepository[ApiKey]):
    """The tenant's API keys."""

    model = ApiKey

    async def page(self, *, limit: int, after: Cursor | None) -> list[ApiKey]:
        """Up to `limit + 1` of the tenant's keys, newest first, after `after`."""
        return await self.keyset_page(self.scoped(), limit=limit, after=after)

    async def list(self) -> list[ApiKey]:
        """Every API key of the tenant, newest first."""
        result = await self.db.execute(self.scoped().order_by(ApiKey.created_at.desc()))
        return list(result.scalars())


async def find_login_candidates(db: AsyncSession, email: str) -> list[User]:
    """Users with this e-mail in any tenant (the `users_login` policy)."""
    async with lookup_scope(db, LOGIN_EMAIL, email):
        result = await db.execute(
            select(User).where(User.email == email).order_by(User.tenant_id).limit(50)
        )
        return list(result.scalars())


async def password_login_allowed(db: AsyncSession, tenant_id: uuid.UUID) -> bool:
    """Whether the tenant lets its users sign in with a password: not when its single sign-on
    provider is enabled with password login turned off (docs/adr/0081). `db` is scoped to it."""
    row = (
        await db.execute(
            select(SsoProvider.enabled, SsoProvider.password_login).where(
                SsoProvider.tenant_id == tenant_id
            )
        )
    ).one_or_none()
    return row is None or not row.enabled or row.password_login


async def find_api_key(db: AsyncSession, key_hash: str) -> ApiKey | None:
    """The live key with this hash, whatever its tenant (the `api_keys_lookup` policy)."""
    async with lookup_scope(db, API_KEY_HASH, key_hash):
        result = await db.execute(
            select(ApiKey).where(ApiKey.key_hash == key_hash, ApiKey.revoked_at.is_(None))
        )
        return result.scalar_one_or_none()


class RefreshFamilyRepository(TenantRepository[RefreshTokenFamily]):
    """The tenant's refresh-token families (one per login, rotated together)."""

    model = RefreshTokenFamily

    async def start(self, user_id: uuid.UUID, expires_at: datetime) -> RefreshTokenFamily:
        """Open a new token family for a login of `user_id`."""
        family = RefreshTokenFamily(
            tenant_id=self.tenant_id, id=uuid.uuid4(), user_id=user_id, expires_at=expires_at
        )
        self.add(family)
        await self.db.flush()
        return family

    async def lock(self, family_id: uuid.UUID, user_id: uuid.UUID) -> RefreshTokenFamily | None:
        """The user's family, row-locked for a rotation; None if it is not theirs."""
        result = await self.db.execute(
            self.scoped()
            .where(RefreshTokenFamily.id == family_id, RefreshTokenFamily.user_id == user_id)
            .with_for_update()
        )
        return result.scalar_one_or_none()

    async def record_use(
        self, family_id: uuid.UUID, jti: str, at: datetime
    ) -> tuple[bool, datetime]:
        """Record that `jti` was exchanged at `at`: (True, at) the first time; (False, the
        time of that first exchange) when it already was. Runs under the family's lock, so
        the row a first exchange wrote is there for the second to read."""
        result = await self.db.execute(
            pg_insert(RefreshTokenUse)
            .values(tenant_id=self.tenant_id, jti=jti, family_id=family_id, created_at=at)
            .on_conflict_do_nothing()
            .returning(RefreshTokenUse.jti)
        )
        if result.scalar_one_or_none() is not None:
            return True, at
        first = await self.db.execute(
            select(RefreshTokenUse.created_at).where(
                RefreshTokenUse.tenant_id == self.tenant_id, RefreshTokenUse.jti == jti
            )
        )
        return False, first.scalar_one()

    async def revoke_user(self, user_id: uuid.UUID) -> None:
        """Revoke every live login of a user (disabled, or their password reset)."""
        await self.db.execute(
            update(RefreshTokenFamily)
            .where(
                RefreshTokenFamily.tenant_id == self.tenant_id,
                RefreshTokenFamily.user_id == user_id,
                RefreshTokenFamily.revoked_at.is_(None),
            )
            .values(revoked_at=func.clock_timestamp())
        )

    async def revoke(self, family_id: uuid.UUID) -> None:
        """Mark the family revoked (once: an already revoked one keeps its time)."""
        await self.db.execute(
            update(RefreshTokenFamily)
            .where(
                RefreshTokenFamily.tenant_id == self.tenant_id,
                RefreshTokenFamily.id == family_id,
                RefreshTokenFamily.revoked_at.is_(None),
            )
            .values(revoked_at=func.clock_timestamp())
        )
