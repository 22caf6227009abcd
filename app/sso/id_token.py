"""Checking an ID token (OpenID Connect Core 1.0 §3.1.3.7) with PyJWT.

Signed by a key from the provider's published set with an asymmetric algorithm the provider
announces (never `none`, never an HMAC keyed with something public); issued by the configured
issuer, for this client; not expired (with `sso_clock_skew_seconds` of leeway); carrying the
nonce of the sign-in it answers.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

import jwt

from app.core.json_types import JsonObject
from app.sso.directory import ProviderDirectory, ProviderMetadata

ASYMMETRIC = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)


class SsoRefused(Exception):
    """A sign-in refused, with a stable code the sign-in page explains."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


@dataclass(frozen=True)
class Expected:
    """What the token must say."""

    issuer: str
    client_id: str
    nonce: str
    leeway_seconds: int


async def verify_id_token(
    directory: ProviderDirectory, metadata: ProviderMetadata, token: str, expected: Expected
) -> JsonObject:
    """The token's claims, or `SsoRefused`."""
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError as exc:
        raise SsoRefused("id_token_invalid", "the ID token is not a JWS") from exc
    algorithm = header.get("alg")
    if algorithm not in ASYMMETRIC or algorithm not in metadata.signing_algorithms:
        raise SsoRefused("id_token_invalid", f"the ID token's algorithm {algorithm!r} is refused")
    kid = header.get("kid")
    key = await directory.signing_key(metadata, kid if isinstance(kid, str) else None)
    if key is None:
        raise SsoRefused("id_token_unknown_key", f"no signing key {kid!r} at the provider")
    try:
        claims: JsonObject = jwt.decode(
            token,
            key,
            algorithms=[algorithm],
            audience=expected.client_id,
            issuer=expected.issuer,
            leeway=expected.leeway_seconds,
            options={"require": ["iss", "sub", "aud", "exp", "iat"]},
        )
    except jwt.ExpiredSignatureError as exc:
        raise SsoRefused("id_token_expired", "the ID token has expired") from exc
    except jwt.InvalidAudienceError as exc:
        raise SsoRefused("id_token_wrong_audience", "the ID token is for another client") from exc
    except jwt.InvalidIssuerError as exc:
        raise SsoRefused("id_token_wrong_issuer", "the ID token is from another issuer") from exc
    except (jwt.PyJWTError, OverflowError) as exc:
        raise SsoRefused("id_token_invalid", f"the ID token is not valid: {exc}") from exc
    audience = claims["aud"]
    # Core §3.1.3.7 (4, 5): with several audiences, the authorised party must be this client.
    if isinstance(audience, list) and len(audience) > 1 and claims.get("azp") != expected.client_id:
        raise SsoRefused("id_token_wrong_audience", "the ID token was issued to another party")
    nonce = claims.get("nonce")
    if not isinstance(nonce, str) or not hmac.compare_digest(nonce, expected.nonce):
        raise SsoRefused("id_token_replayed", "the ID token answers another sign-in (nonce)")
    return claims
