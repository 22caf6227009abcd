"""/admin/settings: a tenant admin reads and sets the tenant's text-search language."""

from __future__ import annotations

from fastapi import APIRouter

from app.auth.principal import AdminPrincipal
from app.core.deps import DbSession
from app.core.errors import error_responses
from app.guardrails.deps import PoliciesDep
from app.knowledge.languages import service as languages
from app.knowledge.schemas import TenantSettingsIn, TenantSettingsOut

router = APIRouter(prefix="/admin/settings", tags=["admin"])


@router.get("", response_model=TenantSettingsOut)
async def read_settings(admin: AdminPrincipal, db: DbSession) -> TenantSettingsOut:
    """The tenant's language, those it may choose, and its lexical index's progress."""
    return await languages.describe(db, admin.tenant_id)


@router.put("", response_model=TenantSettingsOut, responses=error_responses(422))
async def set_settings(
    body: TenantSettingsIn, admin: AdminPrincipal, db: DbSession, policies: PoliciesDep
) -> TenantSettingsOut:
    """Choose the tenant's language: its chunks are re-analysed with it in the background
    (`lexical_index` shows how far; searches and chats go on meanwhile)."""
    return await languages.set_language(db, admin.tenant_id, body.language, policies)
