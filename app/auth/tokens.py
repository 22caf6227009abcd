"""JWT access and refresh tokens. The `typ` claim keeps one from being used as the other."""

from __future__ import annotations

import hashlib
import hmac
import time
import uuid
from dataclasses import dataclass
from typing import Any, Literal

import jwt

from app.config import Settings
from app.core.errors import Unauthorized
from app.core.json_types import JsonObject

TokenType = Literal["access", "refresh"]
ALGORITHM = "HS256"


@dataclass(frozen=True)
class TokenClaims:
    """What a valid token says: who, which tenant, which kind and which login family."""

    user_id: uuid.UUID
    tenant_id: uuid.UUID
    role: str
    token_type: TokenType
    jti: str
    expires_at: int
    family: uuid.UUID
    """The login this token descends from: logout or a replay revokes all of it."""


@dataclass(frozen=True)
class TokenPair:
    """An access and a refresh token issued together, and the access token's lifetime."""

    access_token: str
    refresh_token: str
    expires_in: int


@dataclass(frozen=True)
class Rotation:
    """The exchange a pair comes from: the refresh token's `jti` and the exchange's time.

    A pair issued for a rotation is a function of it (its `jti`s are derived from the parent's
    with the signing key, its `iat` is the exchange's time), so presenting the same refresh
    token again within the reuse window yields byte for byte the same pair, without any token
    being stored."""

    parent_jti: str
    issued_at: int


def _derived_jti(settings: Settings, rotation: Rotation, token_type: TokenType) -> str:
    message = f"rotation:{rotation.parent_jti}:{token_type}".encode()
    return hmac.new(settings.jwt_signing_key().encode(), message, hashlib.sha256).hexdigest()[:32]


def _encode(
    settings: Settings,
    *,
    user_id: uuid.UUID,
    tenant_id: uuid.UUID,
    role: str,
    family: uuid.UUID,
    token_type: TokenType,
    ttl: int,
    rotation: Rotation | None = None,
) -> str:
    if rotation is None:
        now, jti = int(time.time()), uuid.uuid4().hex
    else:
        now, jti = rotation.issued_at, _derived_jti(settings, rotation, token_type)
    payload: dict[str, Any] = {
        "iss": settings.jwt_issuer,
        "sub": str(user_id),
        "tid": str(tenant_id),
        "role": role,
        "typ": token_type,
        "fam": str(family),
        "jti": jti,
        "iat": now,
        "exp": now + ttl,
    }
    return jwt.encode(payload, settings.jwt_signing_key(), algorithm=ALGORITHM)


def issue_pair(
    settings: Settings,
    *,
    user_id: uuid.UUID,
    tenant_id: uuid.UUID,
    role: str,
    family: uuid.UUID,
    rotation: Rotation | None = None,
) -> TokenPair:
    """Sign a new access and refresh token for a user in one login family; for a refresh
    token's exchange (`rotation`), the one pair that exchange always yields."""

    def encode(token_type: TokenType, ttl: int) -> str:
        return _encode(
            settings,
            user_id=user_id,
            tenant_id=tenant_id,
            role=role,
            family=family,
            token_type=token_type,
            ttl=ttl,
            rotation=rotation,
        )

    return TokenPair(
        access_token=encode("access", settings.access_token_ttl_seconds),
        refresh_token=encode("refresh", settings.refresh_token_ttl_seconds),
        expires_in=settings.access_token_ttl_seconds,
    )


def _uuid_claim(payload: JsonObject, name: str) -> uuid.UUID:
    value = payload[name]
    if not isinstance(value, str):  # uuid.UUID() of a list or a number is no ValueError
        raise ValueError(f"claim {name!r} is not a string")
    return uuid.UUID(value)


def decode(settings: Settings, token: str, expected: TokenType) -> TokenClaims:
    """The claims of a valid token of type `expected`, or 401: whatever a token holds (wrong
    types, huge numbers), it is an invalid token, never a server error."""
    try:
        payload = jwt.decode(
            token,
            settings.jwt_signing_key(),
            algorithms=[ALGORITHM],
            issuer=settings.jwt_issuer,
            options={"require": ["exp", "iat", "sub", "tid", "typ", "jti", "fam", "iss"]},
        )
    except jwt.ExpiredSignatureError as exc:
        raise Unauthorized("The token has expired.", code="token_expired") from exc
    except (jwt.PyJWTError, OverflowError) as exc:  # PyJWT's int() of exp=1e999 overflows
        raise Unauthorized("The token is not valid.", code="invalid_token") from exc
    if payload.get("typ") != expected:
        raise Unauthorized(f"An {expected} token is required.", code="invalid_token_type")
    try:
        role = payload.get("role", "member")
        if not isinstance(role, str) or not isinstance(payload["jti"], str):
            raise TypeError("role and jti must be strings")
        return TokenClaims(
            user_id=_uuid_claim(payload, "sub"),
            tenant_id=_uuid_claim(payload, "tid"),
            role=role,
            token_type=expected,
            jti=payload["jti"],
            expires_at=int(payload["exp"]),
            family=_uuid_claim(payload, "fam"),
        )
    except (ValueError, TypeError, OverflowError) as exc:
        raise Unauthorized("The token is not valid.", code="invalid_token") from exc
