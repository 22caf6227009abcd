"""GDPR endpoints: the user's export, their erasure, and a tenant admin's erasure of a user."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

from fastapi import APIRouter
from fastapi.responses import StreamingResponse
from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.types import Receive, Scope, Send

from app.audit.log import record
from app.auth.principal import AdminPrincipal, CurrentPrincipal, Principal
from app.core.deps import DbSession, ResourcesDep
from app.core.errors import NotFound, TooManyRequests, error_responses
from app.models import AuditLog, ChatSession, QueryHistory, User
from app.privacy.erasure import erase_user, purge_cache_keys, refuse_last_admin
from app.privacy.export import export_user
from app.privacy.marks import mark_erased
from app.resources import Resources

logger = logging.getLogger(__name__)
_STOP_WAIT_SECONDS = 5.0
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
    responses={
        200: {"content": {"application/json": {}}, "description": "The export"},
        **error_responses(429),
    },
)
async def export_me(principal: CurrentPrincipal, resources: ResourcesDep) -> StreamingResponse:
    """Everything held about the caller as one JSON document (`format_version`, `generated_at`,
    `user`, `sessions`, `turns`, `attachments`, `session_attachments`, `api_keys`,
    `admin_reads`, `audit_actions`, `logins`, `kb_documents_added`), streamed. Each export
    holds a pooled connection while it streams: a few at once per process, 429 above."""
    if _EXPORTS.active >= resources.settings.export_max_concurrent:
        raise TooManyRequests(
            "Too many exports are running; retry shortly.",
            code="export_busy",
            headers={"Retry-After": "5"},
        )
    body = export_user(
        resources.sessionmaker,
        principal.tenant_id,
        principal.user_id,
        batch_rows=resources.settings.export_batch_rows,
    )
    filename = f"threadline-export-{principal.user_id}.json"
    return _ExportResponse(
        body,
        media_type="application/json",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


class _ExportSlots:
    active = 0


_EXPORTS = _ExportSlots()


class _ExportResponse(StreamingResponse):
    """Holds an export slot from creation until the response has been sent (or failed): the
    release cannot depend on the body being iterated, which a client gone early prevents."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _EXPORTS.active += 1

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            _EXPORTS.active -= 1


async def _stop_running_turns(
    db: AsyncSession, resources: Resources, tenant_id: uuid.UUID, user_id: uuid.UUID
) -> None:
    """Mark the user and their sessions erased, then stop their running turns: a turn that
    goes on (or finishes) after the purge must not write their data back to Redis. Only for
    a user of this tenant: nobody marks another tenant's user."""
    user = select(User.id).where(User.tenant_id == tenant_id, User.id == user_id)
    if (await db.execute(user)).scalar_one_or_none() is None:
        return
    sessions = select(ChatSession.id).where(
        ChatSession.tenant_id == tenant_id, ChatSession.user_id == user_id
    )
    await mark_erased(resources.redis, [user_id, *(await db.execute(sessions)).scalars()])
    pending = select(QueryHistory.id).where(
        QueryHistory.tenant_id == tenant_id,
        QueryHistory.user_id == user_id,
        QueryHistory.status == "pending",
    )
    reached = False
    for turn_id in list((await db.execute(pending)).scalars()):
        try:
            reached = await resources.guards.streams.stop(turn_id) or reached
        except Exception:  # Redis down: the marks still keep its writes out
            logger.warning("could not stop a turn of an erased user", exc_info=True)
    # Wait (bounded) until they have ended: a stopped run still writes its last checkpoint,
    # which the erasure must find and delete. A turn whose process died stays pending.
    running = reached
    deadline = time.monotonic() + _STOP_WAIT_SECONDS
    while running and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        running = (await db.execute(pending.limit(1))).first() is not None


async def _erased_before(db: AsyncSession, tenant_id: uuid.UUID, user_id: uuid.UUID) -> bool:
    """Whether this tenant erased the user: only then may a repeat purge keys naming the id
    (never another tenant's user's)."""
    erasure = select(AuditLog.id).where(
        AuditLog.tenant_id == tenant_id,
        AuditLog.action == "user.erased",
        AuditLog.target_user_id == user_id,
    )
    return (await db.execute(erasure.limit(1))).scalar_one_or_none() is not None


async def _erase(
    db: DbSession, resources: Resources, actor: Principal, user_id: uuid.UUID
) -> ErasureResponse | None:
    await refuse_last_admin(db, actor.tenant_id, user_id)  # before anything is stopped
    await _stop_running_turns(db, resources, actor.tenant_id, user_id)
    erased = await erase_user(db, actor.tenant_id, user_id)
    if not erased.users:
        if await _erased_before(db, actor.tenant_id, user_id):
            # A retry (say Redis was down the first time): clean up what still names the id.
            await purge_cache_keys(resources.redis, {str(user_id)})
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


@router.delete("/me", response_model=ErasureResponse, responses=error_responses(404, 409))
async def erase_me(
    principal: CurrentPrincipal, db: DbSession, resources: ResourcesDep
) -> ErasureResponse:
    """Erase the caller's account and everything of theirs; says what was removed."""
    response = await _erase(db, resources, principal, principal.user_id)
    if response is None:  # erased by a concurrent request meanwhile
        raise NotFound("No such user.", code="user_not_found")
    return response


@router.delete(
    "/admin/users/{user_id}",
    response_model=ErasureResponse,
    tags=["admin"],
    responses=error_responses(404, 409),
)
async def erase_user_as_admin(
    user_id: uuid.UUID, admin: AdminPrincipal, db: DbSession, resources: ResourcesDep
) -> ErasureResponse:
    """Erase a user of the admin's tenant. A user of another tenant, or one already erased,
    is 404: repeating an erasure changes nothing."""
    response = await _erase(db, resources, admin, user_id)
    if response is None:
        raise NotFound("No such user.", code="user_not_found")
    return response
