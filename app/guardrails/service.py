"""Reading and setting a tenant's guardrail policy (the /admin/guardrails use cases)."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.core.errors import NotFound
from app.core.json_types import JsonObject
from app.core.on_commit import on_commit
from app.guardrails.policy import SETTINGS_KEY, GuardrailOverrides, TenantPolicies, resolve
from app.tenants.repository import lock_tenant_settings, store_tenant_settings, tenant_settings


def describe(settings: Settings, stored: JsonObject) -> dict[str, Any]:
    """The tenant's overrides and the policy they put in effect, as the API shows them."""
    policy = resolve(settings, stored, 0)
    return {
        "overrides": policy.overrides,
        "effective": {
            "injection": policy.injection,
            "abuse": policy.abuse,
            "pii": policy.pii,
            "topics": list(policy.topics),
            "faq_threshold": policy.faq_threshold,
            "smalltalk": policy.smalltalk,
        },
    }


async def read_policy(db: AsyncSession, settings: Settings, tenant_id: uuid.UUID) -> dict[str, Any]:
    """The tenant's overrides and the policy in effect (overrides over platform defaults)."""
    stored = await tenant_settings(db, tenant_id)
    return describe(settings, stored.get(SETTINGS_KEY) or {})


async def set_policy(
    db: AsyncSession,
    settings: Settings,
    policies: TenantPolicies,
    tenant_id: uuid.UUID,
    overrides: GuardrailOverrides,
) -> dict[str, Any]:
    """Replace the tenant's overrides; the policy cache forgets the tenant once this commits."""
    current = await lock_tenant_settings(db, tenant_id)
    if current is None:
        raise NotFound("No such tenant.", code="tenant_not_found")
    stored = overrides.model_dump(exclude_none=True)
    await store_tenant_settings(db, tenant_id, {**current, SETTINGS_KEY: stored})
    on_commit(db, lambda: policies.invalidate(tenant_id))
    return describe(settings, stored)
