"""Tenant admins audit how answers were built; each such read is itself logged."""

from __future__ import annotations

import base64
import uuid
from typing import Annotated

from fastapi import APIRouter, Query
from sqlalchemy import select

from app.audit import turns
from app.audit.log import record
from app.audit.schemas import (
    AuditLogEntry,
    AuditLogPage,
    AuditTurn,
    AuditTurnPage,
    AuditTurnRecord,
)
from app.auth.principal import AdminPrincipal
from app.core.deps import DbSession
from app.core.errors import BadRequest, NotFound, error_responses
from app.core.json_types import DateTimeParam
from app.core.pagination import Cursor, split_page
from app.models import AuditLog, QueryHistory

router = APIRouter(prefix="/admin/audit", tags=["admin"])

Limit = Annotated[int, Query(ge=1, le=200, description="Page size")]
CursorParam = Annotated[str | None, Query(max_length=200, description="From `next_cursor`")]


def _summary(turn: QueryHistory) -> AuditTurn:
    return AuditTurn(
        turn_id=turn.id,
        session_id=turn.session_id,
        user_id=turn.user_id,
        created_at=turn.created_at,
        status=turn.status,
        query_composition=turn.query_composition,
        context_metadata=turn.context_metadata,
    )


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
    )
    after = Cursor.decode(cursor) if cursor else None
    rows = await turns.turn_page(db, admin.tenant_id, filters, limit=limit, after=after)
    items, next_cursor = split_page(rows, limit)
    users = sorted({t.user_id for t in items if t.user_id != admin.user_id}, key=str)
    targets: list[uuid.UUID | None] = [user_id] if user_id is not None else [*users]
    # One entry per user whose turns were returned, with target_user_id set: the user's
    # export and the log's target filter then find every read of their data. A page with
    # nobody else's turns still leaves one entry, without a target.
    for target in targets or [None]:
        await record(
            db,
            admin,
            "audit.turns.list",
            target_user_id=target,
            resource="turns",
            details={
                "filters": filters.as_details(),
                "cursor": cursor,
                "returned": len(items),
                "users": [str(target)] if target is not None else [],
            },
        )
    return AuditTurnPage(items=[_summary(t) for t in items], next_cursor=next_cursor)


@router.get("/turns/{turn_id}", response_model=AuditTurnRecord)
async def read_turn(turn_id: uuid.UUID, admin: AdminPrincipal, db: DbSession) -> AuditTurnRecord:
    """One turn's full record: query, answer, composition and the complete context metadata."""
    turn = await turns.get_turn(db, admin.tenant_id, turn_id)
    if turn is None:
        raise NotFound("No such turn.", code="turn_not_found")
    await record(
        db, admin, "audit.turn.read", target_user_id=turn.user_id, resource=f"turns/{turn.id}"
    )
    return AuditTurnRecord(
        **_summary(turn).model_dump(),
        user_query=turn.user_query,
        answer=turn.answer,
        attachment_ids=turn.attachment_ids,
        model=turn.model,
        prompt_tokens=turn.prompt_tokens,
        completion_tokens=turn.completion_tokens,
        latency_ms=turn.latency_ms,
        completed_at=turn.completed_at,
    )


def _log_cursor(entry_id: int) -> str:
    return base64.urlsafe_b64encode(str(entry_id).encode()).decode().rstrip("=")


_MAX_ENTRY_ID = 2**63 - 1  # a bigint: a larger number would fail in the database


def _after_entry(token: str) -> int:
    try:
        raw = base64.urlsafe_b64decode((token + "=" * (-len(token) % 4)).encode("ascii"))
        entry_id = int(raw.decode("ascii"))
    except ValueError as exc:
        raise BadRequest("The cursor is not valid.", code="invalid_cursor") from exc
    if not 0 < entry_id <= _MAX_ENTRY_ID:
        raise BadRequest("The cursor is not valid.", code="invalid_cursor")
    return entry_id


@router.get("/log", response_model=AuditLogPage, responses=error_responses(400))
async def list_log(
    admin: AdminPrincipal,
    db: DbSession,
    actor_user_id: uuid.UUID | None = None,
    target_user_id: uuid.UUID | None = None,
    action: Annotated[str | None, Query(max_length=100)] = None,
    limit: Limit = 50,
    cursor: CursorParam = None,
) -> AuditLogPage:
    """The audit log of the tenant (who read or erased whose data, when, how), newest first."""
    statement = select(AuditLog).where(AuditLog.tenant_id == admin.tenant_id)
    if actor_user_id is not None:
        statement = statement.where(AuditLog.actor_user_id == actor_user_id)
    if target_user_id is not None:
        statement = statement.where(AuditLog.target_user_id == target_user_id)
    if action is not None:
        statement = statement.where(AuditLog.action == action)
    if cursor:
        statement = statement.where(AuditLog.id < _after_entry(cursor))
    rows = list(
        (await db.execute(statement.order_by(AuditLog.id.desc()).limit(limit + 1))).scalars()
    )
    items = rows[:limit]
    next_cursor = _log_cursor(items[-1].id) if len(rows) > limit and items else None
    return AuditLogPage(
        items=[AuditLogEntry.model_validate(e) for e in items], next_cursor=next_cursor
    )
