"""Tenant admins read, set and remove their OpenID provider; every change is audited with
the settings before and after it (the secret never: only whether it changed)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from app.audit.log import record
from app.auth.principal import Principal
from app.config import Settings
from app.core.db import scope_to_tenant
from app.core.errors import Conflict, NotFound
from app.core.json_types import JsonObject
from app.models import SsoProvider
from app.sso.repository import SsoProviderRepository
from app.sso.schemas import SsoSettingsIn
from app.sso.secrets import seal

_AUDITED = (
    "display_name",
    "issuer",
    "client_id",
    "allowed_domains",
    "scopes",
    "groups_claim",
    "enabled",
    "password_login",
)


def _snapshot(provider: SsoProvider | None) -> JsonObject | None:
    if provider is None:
        return None
    return {name: getattr(provider, name) for name in _AUDITED} | {"client_secret": "[redacted]"}


async def get_settings(db: AsyncSession, admin: Principal) -> SsoProvider:
    """The tenant's provider, or 404."""
    await scope_to_tenant(db, admin.tenant_id)
    provider = await SsoProviderRepository(db, admin.tenant_id).get()
    if provider is None:
        raise NotFound("This tenant has no single sign-on provider.", code="sso_not_configured")
    return provider


async def put_settings(
    db: AsyncSession, settings: Settings, admin: Principal, body: SsoSettingsIn
) -> SsoProvider:
    """Create or replace the tenant's provider (409 for a new one without its secret).
    `password_login: false` takes effect only while the provider is enabled
    (`auth.repository.password_login_allowed`): disabling SSO never locks a tenant out."""
    await scope_to_tenant(db, admin.tenant_id)
    providers = SsoProviderRepository(db, admin.tenant_id)
    provider = await providers.get(lock=True)
    before = _snapshot(provider)
    if provider is None and body.client_secret is None:
        raise Conflict(
            "This tenant has no provider yet: its client secret is required.",
            code="sso_client_secret_required",
        )
    values = body.model_dump(exclude={"client_secret"})
    if provider is None:
        provider = SsoProvider(tenant_id=admin.tenant_id, client_secret_encrypted="", **values)
        await providers.add(provider)
    else:
        for name, value in values.items():
            setattr(provider, name, value)
    if body.client_secret is not None:
        provider.client_secret_encrypted = seal(settings, body.client_secret)
    await db.flush()
    await db.refresh(provider)
    after = _snapshot(provider)
    await record(
        db,
        admin,
        "sso.settings.set",
        resource="sso",
        details={
            "before": before,
            "after": after,
            "client_secret_changed": body.client_secret is not None,
        },
    )
    return provider


async def delete_settings(db: AsyncSession, admin: Principal) -> None:
    """Remove the tenant's provider (password login is then the way in again)."""
    provider = await get_settings(db, admin)
    before = _snapshot(provider)
    await SsoProviderRepository(db, admin.tenant_id).remove()
    await record(
        db, admin, "sso.settings.delete", resource="sso", details={"before": before, "after": None}
    )
