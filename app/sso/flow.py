"""The sign-in: authorization code flow with PKCE, state and nonce (docs/adr/0081).

`begin` stores a login attempt (the state's hash, the nonce, the PKCE verifier and a hash of
a cookie binding it to the browser) and says where to send the browser. `complete` takes the
attempt back (deleting it: one callback per state), exchanges the code, checks the ID token,
finds or creates the user, hands the groups claim to the group hook, and starts a session
exactly as a password login does.

Each step owns short transactions of its own: no database connection is held while the
provider is being asked, and the attempt's deletion is committed before anything else can
fail, so a refused callback cannot be replayed either.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.auth import tokens
from app.auth.repository import UserRepository
from app.auth.service import start_session
from app.config import Settings
from app.core.db import scope_to_tenant
from app.models import SsoLoginAttempt, SsoProvider, User
from app.sso.claims import group_names, verified_email
from app.sso.directory import ProviderDirectory
from app.sso.groups import GroupSync
from app.sso.id_token import Expected, SsoRefused, verify_id_token
from app.sso.repository import LoginAttemptRepository, SsoProviderRepository
from app.sso.token_endpoint import exchange_code

SSO_ONLY_CREDENTIAL = "!sso"  # stored as the password hash: no argon2 hash can equal it
"""The password hash of a user created by a sign-in: no password ever matches it."""


def _sha256(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def _challenge(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


@dataclass(frozen=True)
class Redirect:
    """Where to send the browser, and the value of its binding cookie."""

    url: str
    browser_binding: str


@dataclass(frozen=True)
class Callback:
    """What came back to the redirect URI."""

    state: str | None
    code: str | None
    issuer: str | None
    error: str | None
    browser_binding: str | None


async def _live_provider(db: AsyncSession, tenant_id: uuid.UUID) -> SsoProvider | None:
    await scope_to_tenant(db, tenant_id)
    provider = await SsoProviderRepository(db, tenant_id).get()
    return provider if provider is not None and provider.enabled else None


async def begin(
    sessionmaker: async_sessionmaker[AsyncSession],
    settings: Settings,
    directory: ProviderDirectory,
    tenant_id: uuid.UUID,
    *,
    redirect_uri: str,
    login_hint: str | None,
) -> Redirect | None:
    """Start a sign-in at the tenant's provider; None when the tenant has no enabled one.
    `ProviderUnavailable` when its discovery document cannot be read."""
    async with sessionmaker() as db:
        provider = await _live_provider(db, tenant_id)
        if provider is None:
            return None
        issuer, client_id, scopes = provider.issuer, provider.client_id, provider.scopes
    metadata = await directory.metadata(issuer)
    state = f"{tenant_id}.{secrets.token_urlsafe(32)}"
    nonce, verifier = secrets.token_urlsafe(32), secrets.token_urlsafe(48)
    binding = secrets.token_urlsafe(32)
    async with sessionmaker() as db, db.begin():
        await scope_to_tenant(db, tenant_id)
        await LoginAttemptRepository(db, tenant_id).add(
            SsoLoginAttempt(
                tenant_id=tenant_id,
                state_hash=_sha256(state),
                browser_hash=_sha256(binding),
                nonce=nonce,
                code_verifier=verifier,
                issuer=issuer,
                expires_at=datetime.now(UTC) + timedelta(seconds=settings.sso_login_ttl_seconds),
            )
        )
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "scope": scopes,
        "state": state,
        "nonce": nonce,
        "code_challenge": _challenge(verifier),
        "code_challenge_method": "S256",
    }
    if login_hint:
        query["login_hint"] = login_hint
    separator = "&" if "?" in metadata.authorization_endpoint else "?"
    return Redirect(metadata.authorization_endpoint + separator + urlencode(query), binding)


def _tenant_of(state: str) -> uuid.UUID:
    try:
        return uuid.UUID(state.split(".", 1)[0])
    except ValueError as exc:
        raise SsoRefused("bad_state", "the state names no tenant") from exc


async def _take_attempt(
    sessionmaker: async_sessionmaker[AsyncSession], callback: Callback
) -> tuple[uuid.UUID, SsoLoginAttempt, SsoProvider]:
    if not callback.state:
        raise SsoRefused("bad_state", "the callback has no state")
    tenant_id = _tenant_of(callback.state)
    async with sessionmaker() as db:
        async with db.begin():  # committed at once: the state is spent whatever happens next
            await scope_to_tenant(db, tenant_id)
            attempt = await LoginAttemptRepository(db, tenant_id).take(_sha256(callback.state))
        if attempt is None:
            raise SsoRefused("bad_state", "no sign-in under way has this state (used or expired)")
        if not callback.browser_binding or not secrets.compare_digest(
            attempt.browser_hash, _sha256(callback.browser_binding)
        ):
            raise SsoRefused("bad_state", "the sign-in was started in another browser")
        async with db.begin():
            provider = await _live_provider(db, tenant_id)
    if provider is None or provider.issuer != attempt.issuer:
        raise SsoRefused("provider_changed", "the tenant's provider changed during the sign-in")
    return tenant_id, attempt, provider


async def _create_member(
    db: AsyncSession, users: UserRepository, tenant_id: uuid.UUID, email: str
) -> User:
    """A new member with this e-mail; the one a concurrent first sign-in created, if it won."""
    user = User(tenant_id=tenant_id, email=email, password_hash=SSO_ONLY_CREDENTIAL, role="member")
    try:
        async with db.begin_nested():
            users.add(user)
            await db.flush()
    except IntegrityError:
        existing = await users.by_email(email)
        if existing is None:
            raise
        return existing
    return user


async def _sign_in(
    db: AsyncSession,
    settings: Settings,
    tenant_id: uuid.UUID,
    email: str,
    groups: list[str] | None,
    group_sync: GroupSync,
) -> tokens.TokenPair:
    await scope_to_tenant(db, tenant_id)
    users = UserRepository(db, tenant_id)
    user = await users.by_email(email)
    if user is None:  # created just in time, as a member
        user = await _create_member(db, users, tenant_id, email)
    if user.disabled_at is not None:
        raise SsoRefused("account_disabled", "the account is disabled")
    if groups is not None:
        await group_sync.set_user_groups(db, tenant_id, user.id, groups)
    pair = await start_session(db, settings, user)
    user.last_login_at = datetime.now(UTC)
    await db.flush()
    return pair


async def complete(
    sessionmaker: async_sessionmaker[AsyncSession],
    settings: Settings,
    directory: ProviderDirectory,
    group_sync: GroupSync,
    callback: Callback,
    *,
    redirect_uri: str,
) -> tokens.TokenPair:
    """Finish a sign-in: the new session's tokens, or `SsoRefused` (`ProviderUnavailable`
    when the provider cannot be reached)."""
    tenant_id, attempt, provider = await _take_attempt(sessionmaker, callback)
    metadata = await directory.metadata(provider.issuer)
    # RFC 9207: the response says which issuer sent it (a mix-up with another provider).
    says_issuer = callback.issuer is not None or metadata.iss_parameter_supported
    if says_issuer and callback.issuer != provider.issuer:
        raise SsoRefused("wrong_issuer", f"the answer came from {callback.issuer!r}")
    if callback.error is not None:
        raise SsoRefused("provider_error", f"the provider answered {callback.error[:100]!r}")
    if not callback.code:
        raise SsoRefused("bad_request", "the callback has no code")
    id_token = await exchange_code(
        settings, metadata, provider, callback.code, attempt.code_verifier, redirect_uri
    )
    expected = Expected(
        issuer=provider.issuer,
        client_id=provider.client_id,
        nonce=attempt.nonce,
        leeway_seconds=settings.sso_clock_skew_seconds,
    )
    claims = await verify_id_token(directory, metadata, id_token, expected)
    email = verified_email(claims, provider)
    groups = group_names(claims, provider.groups_claim)
    async with sessionmaker() as db, db.begin():
        return await _sign_in(db, settings, tenant_id, email, groups, group_sync)
