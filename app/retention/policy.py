"""A tenant's retention policy, kept in `tenants.settings` (off unless an admin sets it)."""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from app.audit.log import record
from app.auth.principal import Principal
from app.core.errors import NotFound
from app.tenants.repository import (
    RetentionSettings,
    TenantSettings,
    lock_tenant_settings,
    store_tenant_settings,
    tenant_settings,
)

KEY = "retention"


def max_turn_age_days(settings: TenantSettings) -> int | None:
    """The age in days past which turns are purged, from a tenant's settings; None: kept."""
    retention = (settings or {}).get("retention")
    value = retention.get("max_turn_age_days") if retention else None
    return int(value) if value is not None else None


async def get_policy(db: AsyncSession, tenant_id: uuid.UUID) -> int | None:
    """The tenant's maximum turn age in days (None: keep turns forever)."""
    return max_turn_age_days(await tenant_settings(db, tenant_id))


async def set_policy(db: AsyncSession, tenant_id: uuid.UUID, days: int | None) -> None:
    """Set (or, with None, clear) the tenant's maximum turn age."""
    settings = await lock_tenant_settings(db, tenant_id)
    if settings is None:
        raise NotFound("No such tenant.", code="tenant_not_found")
    settings["retention"] = RetentionSettings(max_turn_age_days=days)
    await store_tenant_settings(db, tenant_id, settings)


async def change_policy(db: AsyncSession, actor: Principal, days: int | None) -> None:
    """An admin sets (or clears) the tenant's maximum turn age; the change is audited."""
    await set_policy(db, actor.tenant_id, days)
    await record(db, actor, "retention.set", details={"max_turn_age_days": days})
