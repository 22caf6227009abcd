"""SQL for tenants. A tenant row is visible in its own scope, or by exact name look-up."""

from __future__ import annotations

import uuid
from typing import TypedDict, cast

from sqlalchemy import select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.access.repository import ensure_default_collection
from app.core.db import TENANT_NAME, lookup_scope, scope_to_tenant
from app.core.json_types import JsonObject
from app.models import Tenant


async def get_tenant(db: AsyncSession, tenant_id: uuid.UUID) -> Tenant | None:
    """The tenant of the database session's current scope (RLS shows no other)."""
    result = await db.execute(select(Tenant).where(Tenant.id == tenant_id))
    return result.scalar_one_or_none()


async def find_tenant_by_name(db: AsyncSession, name: str) -> Tenant | None:
    """The tenant with this name, or None (through the narrow RLS door for names)."""
    async with lookup_scope(db, TENANT_NAME, name):
        result = await db.execute(select(Tenant).where(Tenant.name == name))
        return result.scalar_one_or_none()


async def insert_tenant(db: AsyncSession, tenant: Tenant) -> Tenant:
    """Insert in the new tenant's own scope: the policy admits no other row."""
    await scope_to_tenant(db, tenant.id)
    db.add(tenant)
    await db.flush()
    await ensure_default_collection(db, tenant.id)  # its knowledge base's first collection
    return tenant


class RetentionSettings(TypedDict):
    """The tenant's retention: the age in days past which turns are purged (None: kept)."""

    max_turn_age_days: int | None


class TenantSettings(TypedDict, total=False):
    """A tenant's settings document (`tenants.settings`): a section per feature that reads
    it. Each section is validated by its feature (guardrails: `GuardrailOverrides`)."""

    guardrails: JsonObject
    limits: dict[str, int]
    retention: RetentionSettings
    language: str
    """The text-search configuration of the tenant's lexical index (ADR 0076)."""


async def tenant_settings(db: AsyncSession, tenant_id: uuid.UUID) -> TenantSettings:
    """The tenant's settings document ({} when it has none or the tenant is not visible)."""
    stored = await db.scalar(select(Tenant.settings).where(Tenant.id == tenant_id))
    return cast(TenantSettings, dict(stored or {}))


async def lock_tenant_settings(db: AsyncSession, tenant_id: uuid.UUID) -> TenantSettings | None:
    """The tenant's settings, its row locked until the transaction ends (None: no tenant)."""
    row = (
        await db.execute(select(Tenant.settings).where(Tenant.id == tenant_id).with_for_update())
    ).one_or_none()
    return None if row is None else cast(TenantSettings, dict(row[0] or {}))


async def store_tenant_settings(
    db: AsyncSession, tenant_id: uuid.UUID, settings: TenantSettings
) -> None:
    """Replace the tenant's settings document."""
    await db.execute(update(Tenant).where(Tenant.id == tenant_id).values(settings=settings))


async def every_tenant_settings(db: AsyncSession) -> list[tuple[uuid.UUID, TenantSettings]]:
    """Every tenant with its settings, for the maintenance sweeps. The maintenance door
    (migration 0011) lists tenants; it is opened for this one statement and closed again."""
    await db.execute(text("SELECT set_config('threadline.maintenance', 'on', true)"))
    rows = (await db.execute(select(Tenant.id, Tenant.settings).order_by(Tenant.id))).all()
    await db.execute(text("SELECT set_config('threadline.maintenance', '', true)"))
    return [(row.id, cast(TenantSettings, row.settings)) for row in rows]
