"""SQL for a tenant's guardrail policy: its stored settings and how many FAQs it has."""

from __future__ import annotations

import uuid
from typing import cast

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import Faq, Tenant
from app.tenants.repository import TenantSettings


async def policy_inputs(db: AsyncSession, tenant_id: uuid.UUID) -> tuple[TenantSettings, int]:
    """The tenant's settings and FAQ count in one round trip ({} and 0 if it is gone)."""
    faq_count = select(func.count()).select_from(Faq).where(Faq.tenant_id == tenant_id)
    row = (
        await db.execute(
            select(Tenant.settings, faq_count.scalar_subquery()).where(Tenant.id == tenant_id)
        )
    ).one_or_none()
    if row is None:
        return TenantSettings(), 0
    return cast(TenantSettings, row[0] or {}), int(row[1])
