"""Tenant admins audit how answers were built; each such read is itself logged."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query

from app.audit import service
from app.audit.schemas import AuditLogPage, AuditTurnPage, AuditTurnRecord
from app.auth.principal import AdminPrincipal
from app.conversation.turn import filters as turns
from app.core.deps import DbSession
from app.core.errors import error_responses
from app.core.json_types import NO_NUL, DateTimeParam
from app.core.pagination import CURSOR_FORM, ENTRY_CURSOR_FORM, cursor_schema

router = APIRouter(prefix="/admin/audit", tags=["admin"])

Limit = Annotated[int, Query(ge=1, le=200, description="Page size")]
CursorParam = Annotated[
    str | None, Query(max_length=200, json_schema_extra=cursor_schema(CURSOR_FORM, "opaque"))
]
EntryCursorParam = Annotated[
    str | None,
    Query(max_length=200, json_schema_extra=cursor_schema(ENTRY_CURSOR_FORM, "an entry id")),
]


@router.get("/turns", response_model=AuditTurnPage, responses=error_responses(400))
async def list_turns(
    admin: AdminPrincipal,
    db: DbSession,
    user_id: uuid.UUID | None = None,
    session_id: uuid.UUID | None = None,
    since: DateTimeParam | None = None,
    until: DateTimeParam | None = None,
    composition: turns.Composition | None = None,
    min_quality: Annotated[float | None, Query(ge=0, le=1)] = None,
    max_quality: Annotated[float | None, Query(ge=0, le=1)] = None,
    truncated: bool | None = None,
    feedback: Annotated[
        turns.FeedbackFilter | None,
        Query(description="Turns whose user gave this thumb; `any`: either"),
    ] = None,
    collection_id: uuid.UUID | None = None,
    limit: Limit = 50,
    cursor: CursorParam = None,
) -> AuditTurnPage:
    """Turns of the tenant with their context metadata, newest first, filtered."""
    filters = turns.TurnFilters(
        user_id=user_id,
        session_id=session_id,
        since=since,
        until=until,
        composition=composition,
        min_quality=min_quality,
        max_quality=max_quality,
        truncated=truncated,
        feedback=feedback,
        collection_id=collection_id,
    )
    return await service.list_turns(db, admin, filters, limit=limit, cursor=cursor)


@router.get("/turns/{turn_id}", response_model=AuditTurnRecord)
async def read_turn(turn_id: uuid.UUID, admin: AdminPrincipal, db: DbSession) -> AuditTurnRecord:
    """One turn's full record: query, answer, composition and the complete context metadata."""
    return await service.read_turn(db, admin, turn_id)


@router.get("/log", response_model=AuditLogPage, responses=error_responses(400))
async def list_log(
    admin: AdminPrincipal,
    db: DbSession,
    actor_user_id: uuid.UUID | None = None,
    target_user_id: uuid.UUID | None = None,
    action: Annotated[str | None, Query(max_length=100, pattern=NO_NUL)] = None,
    limit: Limit = 50,
    cursor: EntryCursorParam = None,
) -> AuditLogPage:
    """The audit log of the tenant (who read or erased whose data, when, how), newest first."""
    return await service.list_log(
        db,
        admin,
        actor_user_id=actor_user_id,
        target_user_id=target_user_id,
        action=action,
        limit=limit,
        cursor=cursor,
    )
