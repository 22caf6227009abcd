"""Reading and setting a tenant's guardrail policy (the /admin/guardrails use cases)."""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession
from typing_extensions import TypedDict  # pydantic reads it (Python 3.11)

from app.config import Settings
from app.core.errors import NotFound
from app.core.json_types import JsonObject
from app.core.on_commit import on_commit
from app.guardrails.policy import (
    SETTINGS_KEY,
    Action,
    GuardrailOverrides,
    TenantPolicies,
    resolve,
)
from app.tenants.repository import lock_tenant_settings, store_tenant_settings, tenant_settings


class EffectivePolicy(TypedDict):
    """The guardrail policy in effect for a tenant."""

    injection: Action
    abuse: Action
    pii: Action
    topics: list[str]
    faq_threshold: float
    smalltalk: bool


class GuardrailsView(TypedDict):
    """The tenant's overrides (as stored) and the policy they put in effect."""

    overrides: JsonObject
    effective: EffectivePolicy


def describe(settings: Settings, stored: JsonObject) -> GuardrailsView:
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


async def read_policy(db: AsyncSession, settings: Settings, tenant_id: uuid.UUID) -> GuardrailsView:
    """The tenant's overrides and the policy in effect (overrides over platform defaults)."""
    stored = await tenant_settings(db, tenant_id)
    return describe(settings, stored.get(SETTINGS_KEY) or {})


async def set_policy(
    db: AsyncSession,
    settings: Settings,
    policies: TenantPolicies,
    tenant_id: uuid.UUID,
    overrides: GuardrailOverrides,
) -> GuardrailsView:
    """Replace the tenant's overrides; the policy cache forgets the tenant once this commits."""
    current = await lock_tenant_settings(db, tenant_id)
    if current is None:
        raise NotFound("No such tenant.", code="tenant_not_found")
    stored = overrides.model_dump(exclude_none=True)
    await store_tenant_settings(db, tenant_id, {**current, SETTINGS_KEY: stored})
    on_commit(db, lambda: policies.invalidate(tenant_id))
    return describe(settings, stored)
