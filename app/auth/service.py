"""Login, refresh, logout, user and API-key creation. Never commits: the caller owns the
transaction."""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.auth import tokens
from app.auth.passwords import hash_password, verify_password
from app.auth.principal import (
    API_KEY_PREFIX,
    ROLE_RANK,
    Principal,
    hash_api_key,
    raise_disabled,
)
from app.auth.repository import (
    ApiKeyRepository,
    RefreshFamilyRepository,
    UserRepository,
    find_login_candidates,
    password_login_allowed,
)
from app.auth.throttle import LoginThrottle
from app.config import Settings
from app.core.db import scope_to_tenant
from app.core.errors import (
    Conflict,
    Forbidden,
    NotFound,
    RefreshTokenReused,
    Unauthorized,
    UnprocessableEntity,
)
from app.core.pagination import Cursor, split_page
from app.core.redis import RedisHandle
from app.models import ApiKey, User
from app.tenants.repository import get_tenant

# The same for every e-mail: an account in several tenants is tried in its first one only.
_BAD_CREDENTIALS = (
    "The e-mail or password is wrong (for an account in several tenants, add the tenant)."
)


@dataclass(frozen=True)
class LoginAttempt:
    """What a login presents: credentials, the tenant (when the e-mail is in several), and
    the client address it came from (the peer, or whom a trusted proxy forwarded for)."""

    email: str
    password: str
    tenant: str | None
    client: str | None


async def _matches_tenant(db: AsyncSession, user: User, tenant: str) -> bool:
    try:
        return user.tenant_id == uuid.UUID(tenant)
    except ValueError:
        pass
    await scope_to_tenant(db, user.tenant_id)
    found = await get_tenant(db, user.tenant_id)
    await scope_to_tenant(db, None)
    return found is not None and found.name == " ".join(tenant.split())


async def authenticate_password(
    db: AsyncSession, email: str, password: str, tenant: str | None
) -> User:
    """The one user these credentials belong to, or 401.

    Exactly one password hash is verified whatever the e-mail: against the dummy hash when no
    account has it, against the tenant's account when the tenant is given, and against the
    first account (by tenant id) when several have it and none is given. Verifying each of them
    made an e-mail present in several tenants take twice as long, which revealed it.
    """
    candidates = await find_login_candidates(db, email)
    if tenant is not None:
        candidates = [u for u in candidates if await _matches_tenant(db, u, tenant)]
    checked = candidates[0] if candidates else None
    verified = await verify_password(checked.password_hash if checked else None, password)
    if checked is None or not verified:
        raise Unauthorized(_BAD_CREDENTIALS, code="invalid_credentials")
    if len(candidates) > 1:
        # Only a caller who knows the password learns that the e-mail is in several tenants.
        raise Unauthorized(
            "This account exists in several tenants: add the tenant to the request.",
            code="tenant_required",
        )
    if checked.disabled_at is not None:  # told only to whoever knows the password
        raise_disabled()
    return checked


async def start_session(db: AsyncSession, settings: Settings, user: User) -> tokens.TokenPair:
    """A new token family for this login, and its first pair."""
    await scope_to_tenant(db, user.tenant_id)
    expires = datetime.now(UTC) + timedelta(seconds=settings.refresh_token_ttl_seconds)
    family = await RefreshFamilyRepository(db, user.tenant_id).start(user.id, expires)
    return tokens.issue_pair(
        settings, user_id=user.id, tenant_id=user.tenant_id, role=user.role, family=family.id
    )


async def login(
    db: AsyncSession,
    settings: Settings,
    redis: RedisHandle,
    login: LoginAttempt,
) -> tokens.TokenPair:
    """Log in with e-mail and password, throttled per e-mail and client; a new token pair."""
    throttle = LoginThrottle(
        redis,
        max_failures=settings.login_max_failures,
        window_seconds=settings.login_failure_window_seconds,
    )
    await throttle.reserve(login.email, login.client)
    user = await authenticate_password(db, login.email, login.password, login.tenant)
    await throttle.succeeded(login.email, login.client)
    await scope_to_tenant(db, user.tenant_id)
    if not await password_login_allowed(db, user.tenant_id):  # told only to the password's holder
        raise Forbidden(
            "This organisation signs in with single sign-on: use its “Sign in with …” button.",
            code="password_login_disabled",
        )
    pair = await start_session(db, settings, user)
    user.last_login_at = datetime.now(UTC)
    await db.flush()
    return pair


async def refresh(
    sessionmaker: async_sessionmaker[AsyncSession], settings: Settings, refresh_token: str
) -> tokens.TokenPair:
    """Exchange a refresh token for a new pair. Each works once; a replay revokes the family
    and raises `RefreshTokenReused`. The same token presented again within
    `refresh_reuse_window_seconds` of its exchange is no replay but a race (two tabs of one
    browser refreshing with the same cookie): it gets the very pair the exchange gave.

    The exchange owns its transaction (a database session of its own, not the request's): a replay's
    revocation must be stored although the request fails, and the request dependency rolls
    back a failed request. So the revocation commits here, then the error is raised.
    """
    claims = tokens.decode(settings, refresh_token, "refresh")
    async with sessionmaker() as db:
        await scope_to_tenant(db, claims.tenant_id)
        async with db.begin():
            pair = await _rotate(db, settings, claims)
    if pair is None:
        raise RefreshTokenReused(
            "This refresh token was already used; the session is signed out.",
            code="token_reused",
        )
    return pair


async def _rotate(
    db: AsyncSession, settings: Settings, claims: tokens.TokenClaims
) -> tokens.TokenPair | None:
    """The new pair; None (the family revoked) when the token was used before, longer ago
    than the reuse window."""
    families = RefreshFamilyRepository(db, claims.tenant_id)
    family = await families.lock(claims.family, claims.user_id)
    if family is None or family.revoked_at is not None:
        raise Unauthorized("This session was signed out.", code="token_revoked")
    # Whole seconds: the new tokens' `iat` is this time, and a reissue must match it exactly.
    now = datetime.fromtimestamp(int(datetime.now(UTC).timestamp()), UTC)
    first, used_at = await families.record_use(family.id, claims.jti, now)
    window = settings.refresh_reuse_window_seconds
    if not first and (window == 0 or now - used_at > timedelta(seconds=window)):
        await families.revoke(family.id)
        return None
    user = await UserRepository(db, claims.tenant_id).get(claims.user_id)
    if user is None:
        raise Unauthorized("The account no longer exists.", code="unknown_account")
    if user.disabled_at is not None:
        raise_disabled()
    rotation = tokens.Rotation(parent_jti=claims.jti, issued_at=int(used_at.timestamp()))
    return tokens.issue_pair(
        settings,
        user_id=user.id,
        tenant_id=user.tenant_id,
        role=user.role,
        family=family.id,
        rotation=rotation,
    )


async def logout(db: AsyncSession, principal: Principal) -> None:
    """Revoke the token family of the caller's login, if it came from one."""
    if principal.token_family is not None:
        await RefreshFamilyRepository(db, principal.tenant_id).revoke(principal.token_family)


async def logout_refresh_token(db: AsyncSession, settings: Settings, refresh_token: str) -> None:
    """Revoke the token family of a refresh token (a browser's logout); an invalid or expired
    token has nothing left to sign out."""
    try:
        claims = tokens.decode(settings, refresh_token, "refresh")
    except Unauthorized:
        return
    await scope_to_tenant(db, claims.tenant_id)
    await RefreshFamilyRepository(db, claims.tenant_id).revoke(claims.family)


def check_new_password(settings: Settings, password: str) -> None:
    """Refuse (422) a password too short once its surrounding whitespace is discounted: eight
    spaces, or a short word padded with them, is no password. Stored as given."""
    if len(password.strip()) < settings.password_min_length:
        raise UnprocessableEntity(
            f"The password needs at least {settings.password_min_length} characters "
            "besides leading and trailing spaces.",
            code="weak_password",
        )


async def create_user(
    db: AsyncSession,
    settings: Settings,
    tenant_id: uuid.UUID,
    *,
    email: str,
    password: str,
    role: str,
) -> User:
    """A new user of the tenant (409 when the e-mail is taken there)."""
    check_new_password(settings, password)
    users = UserRepository(db, tenant_id)
    if await users.by_email(email) is not None:
        raise Conflict("A user with this e-mail already exists.", code="user_exists")
    user = User(
        tenant_id=tenant_id,
        email=email,
        password_hash=await hash_password(password),
        role=role,
    )
    try:
        async with db.begin_nested():
            users.add(user)
            await db.flush()
    except IntegrityError as exc:
        raise Conflict("A user with this e-mail already exists.", code="user_exists") from exc
    await db.refresh(user)
    return user


async def create_api_key(
    db: AsyncSession, principal: Principal, *, name: str, role: str
) -> tuple[ApiKey, str]:
    """A new key acting as `principal`, with at most the principal's role."""
    if role not in ROLE_RANK:
        raise UnprocessableEntity("The role must be 'member' or 'admin'.")
    if ROLE_RANK[role] > ROLE_RANK[principal.role]:
        raise UnprocessableEntity("A key cannot have more rights than its creator.")
    raw = API_KEY_PREFIX + secrets.token_urlsafe(32)
    key = ApiKey(
        tenant_id=principal.tenant_id,
        user_id=principal.user_id,
        name=name,
        key_prefix=raw[:10],
        key_hash=hash_api_key(raw),
        role=role,
    )
    ApiKeyRepository(db, principal.tenant_id).add(key)
    await db.flush()
    return key, raw


async def list_api_keys(db: AsyncSession, principal: Principal) -> list[ApiKey]:
    """The tenant's API keys, newest first."""
    return await ApiKeyRepository(db, principal.tenant_id).list()


async def page_api_keys(
    db: AsyncSession, principal: Principal, *, limit: int, cursor: str | None
) -> tuple[list[ApiKey], str | None]:
    """A page of the tenant's API keys, newest first, and the next page's cursor."""
    after = Cursor.decode(cursor) if cursor else None
    rows = await ApiKeyRepository(db, principal.tenant_id).page(limit=limit, after=after)
    return split_page(rows, limit)


async def revoke_api_key(db: AsyncSession, principal: Principal, key_id: uuid.UUID) -> None:
    """Revoke one of the tenant's live keys (404 when there is none)."""
    key = await ApiKeyRepository(db, principal.tenant_id).get(key_id)
    if key is None or key.revoked_at is not None:
        raise NotFound("No such API key.")
    key.revoked_at = datetime.now(UTC)
    await db.flush()
