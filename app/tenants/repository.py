"""SQL for tenants. A tenant row is visible in its own scope, or by exact name look-up."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.db import TENANT_NAME, lookup_scope, scope_to_tenant
from app.models import Tenant


async def get_tenant(session: AsyncSession, tenant_id: uuid.UUID) -> Tenant | None:
    """The tenant of the session's current scope (RLS shows no other)."""
    result = await session.execute(select(Tenant).where(Tenant.id == tenant_id))
    return result.scalar_one_or_none()


async def find_tenant_by_name(session: AsyncSession, name: str) -> Tenant | None:
    async with lookup_scope(session, TENANT_NAME, name):
        result = await session.execute(select(Tenant).where(Tenant.name == name))
        return result.scalar_one_or_none()


async def insert_tenant(session: AsyncSession, tenant: Tenant) -> Tenant:
    """Insert in the new tenant's own scope: the policy admits no other row."""
    await scope_to_tenant(session, tenant.id)
    session.add(tenant)
    await session.flush()
    return tenant
