"""A tenant's retention policy, kept in `tenants.settings` (off unless an admin sets it)."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import Tenant

KEY = "retention"


def max_turn_age_days(settings: dict[str, Any]) -> int | None:
    value = (settings or {}).get(KEY, {}).get("max_turn_age_days")
    return int(value) if value is not None else None


async def get_policy(db: AsyncSession, tenant_id: uuid.UUID) -> int | None:
    settings = (
        await db.execute(select(Tenant.settings).where(Tenant.id == tenant_id))
    ).scalar_one()
    return max_turn_age_days(settings)


async def set_policy(db: AsyncSession, tenant_id: uuid.UUID, days: int | None) -> None:
    settings = dict(
        (
            await db.execute(
                select(Tenant.settings).where(Tenant.id == tenant_id).with_for_update()
            )
        ).scalar_one()
        or {}
    )
    settings[KEY] = {"max_turn_age_days": days}
    await db.execute(update(Tenant).where(Tenant.id == tenant_id).values(settings=settings))
