"""/admin/guardrails: a tenant admin reads and sets the tenant's guardrail and triage policy."""

from __future__ import annotations

from fastapi import APIRouter

from app.auth.principal import AdminPrincipal
from app.core.deps import DbSession, SettingsDep
from app.guardrails import service
from app.guardrails.deps import PoliciesDep
from app.guardrails.policy import GuardrailOverrides

router = APIRouter(prefix="/admin/guardrails", tags=["admin"])


@router.get("")
async def read_guardrails(
    admin: AdminPrincipal, db: DbSession, settings: SettingsDep
) -> service.GuardrailsView:
    """The tenant's overrides and the policy in effect (overrides over platform defaults)."""
    return await service.read_policy(db, settings, admin.tenant_id)


@router.put("")
async def set_guardrails(
    body: GuardrailOverrides,
    admin: AdminPrincipal,
    db: DbSession,
    settings: SettingsDep,
    policies: PoliciesDep,
) -> service.GuardrailsView:
    """Replace the tenant's overrides; null fields fall back to the platform defaults."""
    return await service.set_policy(db, settings, policies, admin.tenant_id, body)
