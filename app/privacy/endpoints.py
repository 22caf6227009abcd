"""GDPR endpoints: the user's export, their erasure, and a tenant admin's erasure of a user."""

from __future__ import annotations

import uuid

from fastapi import APIRouter
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from app.audit.log import record
from app.auth.principal import AdminPrincipal, CurrentPrincipal, Principal
from app.core.deps import DbSession, ResourcesDep
from app.core.errors import NotFound
from app.core.resources import Resources
from app.privacy.erasure import erase_user, purge_cache_keys
from app.privacy.export import export_user

router = APIRouter(tags=["privacy"])


class ErasureCounts(BaseModel):
    sessions: int
    turns: int
    attachments: int
    chunks: int
    checkpoints: int
    """Rows removed from LangGraph's checkpoint tables (checkpoints, blobs, writes)."""
    cache_keys: int
    users: int


class ErasureResponse(BaseModel):
    deleted: ErasureCounts


@router.get(
    "/me/export",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/json": {}}, "description": "The export"}},
)
async def export_me(principal: CurrentPrincipal, resources: ResourcesDep) -> StreamingResponse:
    """Everything held about the caller as one JSON document (`format_version`, `generated_at`,
    `user`, `sessions`, `turns`, `attachments`, `session_attachments`, `api_keys`,
    `admin_reads`), streamed."""
    body = export_user(
        resources.sessionmaker,
        principal.tenant_id,
        principal.user_id,
        batch_rows=resources.settings.export_batch_rows,
    )
    filename = f"threadline-export-{principal.user_id}.json"
    return StreamingResponse(
        body,
        media_type="application/json",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


async def _erase(
    db: DbSession, resources: Resources, actor: Principal, user_id: uuid.UUID
) -> ErasureResponse | None:
    erased = await erase_user(db, actor.tenant_id, user_id)
    if not erased.users:
        return None
    await record(
        db,
        actor,
        "user.erased",
        target_user_id=user_id,
        resource=f"users/{user_id}",
        details={"deleted": erased.counts()},
    )
    await db.commit()  # the data is gone before the caches are touched
    erased.cache_keys = await purge_cache_keys(resources.redis, erased.ids)
    return ErasureResponse(deleted=ErasureCounts(**erased.counts()))


@router.delete("/me", response_model=ErasureResponse)
async def erase_me(
    principal: CurrentPrincipal, db: DbSession, resources: ResourcesDep
) -> ErasureResponse:
    """Erase the caller's account and everything of theirs; says what was removed."""
    response = await _erase(db, resources, principal, principal.user_id)
    if response is None:  # erased by a concurrent request meanwhile
        raise NotFound("No such user.", code="user_not_found")
    return response


@router.delete("/admin/users/{user_id}", response_model=ErasureResponse, tags=["admin"])
async def erase_user_as_admin(
    user_id: uuid.UUID, admin: AdminPrincipal, db: DbSession, resources: ResourcesDep
) -> ErasureResponse:
    """Erase a user of the admin's tenant. A user of another tenant, or one already erased,
    is 404: repeating an erasure changes nothing."""
    response = await _erase(db, resources, admin, user_id)
    if response is None:
        raise NotFound("No such user.", code="user_not_found")
    return response
