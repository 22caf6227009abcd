"""Who is calling: resolved from a bearer token or an API key, once per request."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from typing import Annotated, Literal, NoReturn

from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, OAuth2PasswordBearer

from app.access.scope import restrict_to_user
from app.auth import tokens
from app.auth.repository import UserRepository, find_api_key
from app.config import Settings
from app.core.db import scope_to_tenant
from app.core.deps import DbSession, SettingsDep
from app.core.errors import Forbidden, Unauthorized

ROLE_RANK = {"member": 0, "admin": 1}
API_KEY_PREFIX = "tl_"
"""How every API key starts (app/auth/service.py); an access token (a JWT) never does."""

# OAuth2 password flow in the OpenAPI schema, so /docs can log in with the form.
_bearer = OAuth2PasswordBearer(tokenUrl="/auth/token", auto_error=False)
_api_key = APIKeyHeader(name="X-API-Key", auto_error=False, description="Tenant API key")


@dataclass(frozen=True)
class Principal:
    """The authenticated caller of a request: user, tenant, role and how they signed in."""

    user_id: uuid.UUID
    tenant_id: uuid.UUID
    email: str
    role: str
    via: Literal["token", "api_key"]
    token_family: uuid.UUID | None = None
    api_key_id: uuid.UUID | None = None
    """The key the request came with (`via == "api_key"`)."""
    account_role: str | None = None
    """The account's own role when the credential carries less (a member key of an admin);
    None when the credential has the account's whole role (docs/adr/0047)."""

    @property
    def is_admin(self) -> bool:
        """Whether the caller may use admin-only operations."""
        return self.role == "admin"

    @property
    def holds_whole_account(self) -> bool:
        """Whether the credential carries the account's own role, not a reduced one: only
        such a credential may do what the account's role alone allows on the account itself
        (erase it, read the keys it holds)."""
        return self.account_role is None


def hash_api_key(raw_key: str) -> str:
    # API keys are 256-bit random strings: a fast hash is enough, and lets us index it.
    """The stored, indexed form of an API key: its SHA-256 hex digest."""
    return hashlib.sha256(raw_key.encode()).hexdigest()


BearerToken = Annotated[str | None, Depends(_bearer)]


def token_user(settings: Settings, bearer: str | None) -> uuid.UUID | None:
    """The user of a valid access token, by its signature alone (no database read): for
    refusing work before authentication reads the user. None for an API key, and for a
    missing or invalid token (authentication answers those as it always does)."""
    if bearer is None or bearer.startswith(API_KEY_PREFIX):
        return None
    try:
        return tokens.decode(settings, bearer, "access").user_id
    except Unauthorized:
        return None


def raise_disabled() -> NoReturn:
    """401 for every credential of an account an admin disabled."""
    raise Unauthorized("This account is disabled.", code="account_disabled")


async def authenticate(
    request: Request,
    db: DbSession,
    settings: SettingsDep,
    bearer: Annotated[str | None, Depends(_bearer)],
    api_key: Annotated[str | None, Depends(_api_key)],
) -> Principal:
    """Resolve the caller and scope the request's transaction to their tenant.

    The user row is read on every request, so a deleted user or a changed role takes effect
    at once rather than when the token expires; so are the collections they may see. An API
    key is accepted as the bearer token too, as OpenAI and MCP clients send theirs
    (docs/adr/0038).
    """
    if not api_key and bearer is not None and bearer.startswith(API_KEY_PREFIX):
        api_key, bearer = bearer, None
    if api_key:
        key = await find_api_key(db, hash_api_key(api_key))
        if key is None:
            raise Unauthorized("The API key is not valid.", code="invalid_api_key")
        await scope_to_tenant(db, key.tenant_id)
        user = await UserRepository(db, key.tenant_id).get(key.user_id)
        if user is None:
            raise Unauthorized("The account no longer exists.", code="unknown_account")
        if user.disabled_at is not None:
            raise_disabled()
        role = min(user.role, key.role, key=ROLE_RANK.__getitem__)
        principal = Principal(
            user.id,
            key.tenant_id,
            user.email,
            role,
            "api_key",
            api_key_id=key.id,
            account_role=user.role if role != user.role else None,
        )
    elif bearer is not None:
        claims = tokens.decode(settings, bearer, "access")
        await scope_to_tenant(db, claims.tenant_id)
        found = await UserRepository(db, claims.tenant_id).with_family(
            claims.user_id, claims.family
        )
        if found is None:
            raise Unauthorized("The account no longer exists.", code="unknown_account")
        identity, revoked_at = found
        if identity.disabled:
            raise_disabled()
        if revoked_at is not None:
            raise Unauthorized("This session was signed out.", code="token_revoked")
        principal = Principal(
            identity.id, claims.tenant_id, identity.email, identity.role, "token", claims.family
        )
    else:
        raise Unauthorized("Authentication required: send a bearer token or an X-API-Key.")
    # The request sees only the collections its caller may see now (ADR 0078): read here,
    # on every request, never cached, and held by RLS as well as by the queries' filters.
    await restrict_to_user(db, principal.tenant_id, principal.user_id, is_admin=principal.is_admin)
    request.state.principal = principal
    return principal


CurrentPrincipal = Annotated[Principal, Depends(authenticate)]


async def require_admin(principal: CurrentPrincipal) -> Principal:
    """Dependency that admits only admins (403 otherwise)."""
    if not principal.is_admin:
        raise Forbidden("This requires the admin role.", code="admin_required")
    return principal


AdminPrincipal = Annotated[Principal, Depends(require_admin)]


# For endpoints whose service runs its own transactions and may take long (a model call, an
# erasure waiting for running turns to stop): authentication only read, so its transaction
# ends at once and no pooled connection is held meanwhile.


async def release_after_auth(principal: CurrentPrincipal, db: DbSession) -> Principal:
    """The authenticated caller, with the request's transaction already ended."""
    await db.rollback()
    return principal


async def release_after_admin(admin: AdminPrincipal, db: DbSession) -> Principal:
    """The authenticated admin, with the request's transaction already ended."""
    await db.rollback()
    return admin


Caller = Annotated[Principal, Depends(release_after_auth)]
AdminCaller = Annotated[Principal, Depends(release_after_admin)]
