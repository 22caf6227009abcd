"""/admin/guardrails: a tenant admin reads and sets the tenant's guardrail and triage policy."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from sqlalchemy import select

from app.auth.principal import AdminPrincipal
from app.core.deps import DbSession, ResourcesDep
from app.guardrails.policy import SETTINGS_KEY, GuardrailOverrides, resolve
from app.models import Tenant

router = APIRouter(prefix="/admin/guardrails", tags=["admin"])


def _effective(resources: ResourcesDep, stored: dict[str, Any]) -> dict[str, Any]:
    policy = resolve(resources.settings, stored, 0)
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


@router.get("")
async def read_guardrails(
    admin: AdminPrincipal, session: DbSession, resources: ResourcesDep
) -> dict[str, Any]:
    """The tenant's overrides and the policy in effect (overrides over platform defaults)."""
    settings = await session.scalar(select(Tenant.settings).where(Tenant.id == admin.tenant_id))
    return _effective(resources, (settings or {}).get(SETTINGS_KEY) or {})


@router.put("")
async def set_guardrails(
    body: GuardrailOverrides, admin: AdminPrincipal, session: DbSession, resources: ResourcesDep
) -> dict[str, Any]:
    """Replace the tenant's overrides; null fields fall back to the platform defaults."""
    tenant = (
        await session.execute(select(Tenant).where(Tenant.id == admin.tenant_id))
    ).scalar_one()
    stored = body.model_dump(exclude_none=True)
    tenant.settings = {**(tenant.settings or {}), SETTINGS_KEY: stored}
    await session.commit()
    resources.turn_context.policies.invalidate(admin.tenant_id)
    return _effective(resources, stored)
