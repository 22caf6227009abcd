"""Login, refresh, user and API-key creation. Never commits: the caller owns the transaction."""

from __future__ import annotations

import secrets
import time
import uuid
from datetime import UTC, datetime

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth import tokens
from app.auth.passwords import hash_password, verify_password
from app.auth.principal import ROLE_RANK, Principal, hash_api_key
from app.auth.repository import ApiKeyRepository, UserRepository, find_login_candidates
from app.config import Settings
from app.core.db import scope_to_tenant
from app.core.errors import Conflict, NotFound, Unauthorized, UnprocessableEntity
from app.core.redis import RedisHandle
from app.models import ApiKey, User
from app.tenants.repository import get_tenant

_BAD_CREDENTIALS = "The e-mail or password is wrong."


async def _matches_tenant(session: AsyncSession, user: User, tenant: str) -> bool:
    try:
        return user.tenant_id == uuid.UUID(tenant)
    except ValueError:
        pass
    await scope_to_tenant(session, user.tenant_id)
    found = await get_tenant(session, user.tenant_id)
    await scope_to_tenant(session, None)
    return found is not None and found.name == " ".join(tenant.split())


async def login(
    session: AsyncSession, settings: Settings, email: str, password: str, tenant: str | None
) -> tokens.TokenPair:
    candidates = await find_login_candidates(session, email)
    if tenant is not None:
        candidates = [u for u in candidates if await _matches_tenant(session, u, tenant)]
    matched = [u for u in candidates if await verify_password(u.password_hash, password)]
    if not candidates:
        await verify_password(None, password)
    if len(matched) != 1:
        if len(matched) > 1:
            raise Unauthorized(
                "This account exists in several tenants: add the tenant to the request.",
                code="tenant_required",
            )
        raise Unauthorized(_BAD_CREDENTIALS, code="invalid_credentials")
    user = matched[0]
    return tokens.issue_pair(settings, user_id=user.id, tenant_id=user.tenant_id, role=user.role)


async def refresh(
    session: AsyncSession, settings: Settings, redis: RedisHandle, refresh_token: str
) -> tokens.TokenPair:
    """Exchange a refresh token for a new pair. Each refresh token works once."""
    claims = tokens.decode(settings, refresh_token, "refresh")
    ttl = max(1, claims.expires_at - int(time.time()))
    try:
        first_use = await redis.client.set(
            redis.key("refresh-used", claims.jti), b"1", nx=True, ex=ttl
        )
    except Exception:  # Redis down: degrade to stateless refresh rather than lock users out
        first_use = True
    if not first_use:
        raise Unauthorized("This refresh token was already used.", code="token_reused")
    await scope_to_tenant(session, claims.tenant_id)
    user = await UserRepository(session, claims.tenant_id).get(claims.user_id)
    if user is None:
        raise Unauthorized("The account no longer exists.", code="unknown_account")
    return tokens.issue_pair(settings, user_id=user.id, tenant_id=user.tenant_id, role=user.role)


async def create_user(
    session: AsyncSession,
    settings: Settings,
    tenant_id: uuid.UUID,
    *,
    email: str,
    password: str,
    role: str,
) -> User:
    if len(password) < settings.password_min_length:
        raise UnprocessableEntity(
            f"The password needs at least {settings.password_min_length} characters.",
            code="weak_password",
        )
    users = UserRepository(session, tenant_id)
    if await users.by_email(email) is not None:
        raise Conflict("A user with this e-mail already exists.", code="user_exists")
    user = User(
        tenant_id=tenant_id,
        email=email,
        password_hash=await hash_password(password),
        role=role,
    )
    try:
        async with session.begin_nested():
            users.add(user)
            await session.flush()
    except IntegrityError as exc:
        raise Conflict("A user with this e-mail already exists.", code="user_exists") from exc
    return user


async def create_api_key(
    session: AsyncSession, principal: Principal, *, name: str, role: str
) -> tuple[ApiKey, str]:
    """A new key acting as `principal`, with at most the principal's role."""
    if ROLE_RANK[role] > ROLE_RANK[principal.role]:
        raise UnprocessableEntity("A key cannot have more rights than its creator.")
    raw = "tl_" + secrets.token_urlsafe(32)
    key = ApiKey(
        tenant_id=principal.tenant_id,
        user_id=principal.user_id,
        name=name,
        key_prefix=raw[:10],
        key_hash=hash_api_key(raw),
        role=role,
    )
    ApiKeyRepository(session, principal.tenant_id).add(key)
    await session.flush()
    return key, raw


async def revoke_api_key(session: AsyncSession, principal: Principal, key_id: uuid.UUID) -> None:
    key = await ApiKeyRepository(session, principal.tenant_id).get(key_id)
    if key is None or key.revoked_at is not None:
        raise NotFound("No such API key.")
    key.revoked_at = datetime.now(UTC)
    await session.flush()
