"""GDPR endpoints: the user's export, their erasure, and a tenant admin's erasure of a user."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter
from fastapi.responses import StreamingResponse
from pydantic import BaseModel
from starlette.types import Receive, Scope, Send

from app.auth.principal import AdminCaller, Caller, CurrentPrincipal, Principal
from app.core.deps import RedisDep, SessionmakerDep, SettingsDep
from app.core.errors import NotFound, TooManyRequests, error_responses
from app.privacy import service
from app.privacy.deps import TurnStopperDep
from app.privacy.export import export_user

router = APIRouter(tags=["privacy"])


class ErasureCounts(BaseModel):
    """How many rows of each kind an erasure removed."""

    sessions: int
    turns: int
    attachments: int
    chunks: int
    checkpoints: int
    """Rows removed from LangGraph's checkpoint tables (checkpoints, blobs, writes)."""
    cache_keys: int
    users: int


class ErasureResponse(BaseModel):
    """The answer to an erasure: what was deleted."""

    deleted: ErasureCounts


@router.get(
    "/me/export",
    response_class=StreamingResponse,
    responses={
        200: {"content": {"application/json": {}}, "description": "The export"},
        **error_responses(429),
    },
)
async def export_me(
    principal: CurrentPrincipal, settings: SettingsDep, sessionmaker: SessionmakerDep
) -> StreamingResponse:
    """Everything held about the caller as one JSON document (`format_version`, `generated_at`,
    `user`, `sessions`, `turns`, `attachments`, `session_attachments`, `api_keys`,
    `admin_reads`, `audit_actions`, `logins`, `kb_documents_added`, `withheld`), streamed.
    A key with less than its account's role (a member key of an admin) gets what that role
    may read: of `api_keys` only itself, and no `audit_actions`; `withheld` names what was
    cut. Each export holds a pooled connection while it streams: a few at once per process,
    429 above."""
    if _EXPORTS.active >= settings.export_max_concurrent:
        raise TooManyRequests(
            "Too many exports are running; retry shortly.",
            code="export_busy",
            headers={"Retry-After": "5"},
        )
    body = export_user(
        sessionmaker,
        principal.tenant_id,
        principal.user_id,
        batch_rows=settings.export_batch_rows,
        only_key=None if principal.holds_whole_account else principal.api_key_id,
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


async def _erase(
    sessionmaker: SessionmakerDep,
    redis: RedisDep,
    streams: TurnStopperDep,
    actor: Principal,
    user_id: uuid.UUID,
) -> ErasureResponse:
    erased = await service.erase(sessionmaker, redis, streams, actor, user_id)
    if erased is None:  # no such user, or erased by a concurrent request meanwhile
        raise NotFound("No such user.", code="user_not_found")
    return ErasureResponse(deleted=ErasureCounts(**erased.counts()))


@router.delete("/me", response_model=ErasureResponse, responses=error_responses(403, 404, 409))
async def erase_me(
    principal: Caller,
    sessionmaker: SessionmakerDep,
    redis: RedisDep,
    streams: TurnStopperDep,
) -> ErasureResponse:
    """Erase the caller's account and everything of theirs; says what was removed. A key
    with less than its account's role (a member key of an admin) gets 403
    `whole_account_required`."""
    return await _erase(sessionmaker, redis, streams, principal, principal.user_id)


@router.delete(
    "/admin/users/{user_id}",
    response_model=ErasureResponse,
    tags=["admin"],
    responses=error_responses(404, 409),
)
async def erase_user_as_admin(
    user_id: uuid.UUID,
    admin: AdminCaller,
    sessionmaker: SessionmakerDep,
    redis: RedisDep,
    streams: TurnStopperDep,
) -> ErasureResponse:
    """Erase a user of the admin's tenant. A user of another tenant, or one already erased,
    is 404: repeating an erasure changes nothing."""
    return await _erase(sessionmaker, redis, streams, admin, user_id)
