"""The admin audit's use cases: page through turns and the log, read a turn; each read of
someone's data is itself logged, in the same transaction."""

from __future__ import annotations

import re
import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from app.audit.log import record
from app.audit.repository import AuditLogRepository
from app.audit.schemas import (
    AuditFeedback,
    AuditLogEntry,
    AuditLogPage,
    AuditTurn,
    AuditTurnPage,
    AuditTurnRecord,
)
from app.auth.principal import Principal
from app.conversation.repository import TurnRepository
from app.conversation.turn.filters import TurnFilters
from app.conversation.turn.manifest import Manifest
from app.core.errors import BadRequest, NotFound
from app.core.pagination import ENTRY_CURSOR_FORM, Cursor, split_page
from app.feedback.repository import FeedbackRepository
from app.models import QueryHistory, TurnFeedback


def _summary(turn: QueryHistory, feedback: TurnFeedback | None) -> AuditTurn:
    return AuditTurn(
        turn_id=turn.id,
        session_id=turn.session_id,
        user_id=turn.user_id,
        created_at=turn.created_at,
        status=turn.status,
        query_composition=turn.query_composition,
        context_metadata=Manifest.read(turn.context_metadata, turn.manifest_version),
        feedback=AuditFeedback.model_validate(feedback) if feedback is not None else None,
    )


async def list_turns(
    db: AsyncSession,
    admin: Principal,
    filters: TurnFilters,
    *,
    limit: int,
    cursor: str | None,
) -> AuditTurnPage:
    """Turns of the tenant with their context metadata, newest first, filtered; logged."""
    after = Cursor.decode(cursor) if cursor else None
    rows = await TurnRepository(db, admin.tenant_id).audit_page(filters, limit=limit, after=after)
    items, next_cursor = split_page(rows, limit)
    users = sorted({t.user_id for t in items if t.user_id != admin.user_id}, key=str)
    targets: list[uuid.UUID | None] = [filters.user_id] if filters.user_id is not None else [*users]
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
    feedback = await FeedbackRepository(db, admin.tenant_id).of_turns([t.id for t in items])
    return AuditTurnPage(
        items=[_summary(t, feedback.get(t.id)) for t in items], next_cursor=next_cursor
    )


async def read_turn(db: AsyncSession, admin: Principal, turn_id: uuid.UUID) -> AuditTurnRecord:
    """One turn's full record (query, answer, composition, context metadata); logged."""
    turn = await TurnRepository(db, admin.tenant_id).get(turn_id)
    if turn is None:
        raise NotFound("No such turn.", code="turn_not_found")
    await record(
        db, admin, "audit.turn.read", target_user_id=turn.user_id, resource=f"turns/{turn.id}"
    )
    feedback = await FeedbackRepository(db, admin.tenant_id).of_turns([turn.id])
    return AuditTurnRecord(
        **dict(_summary(turn, feedback.get(turn.id))),
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
    return str(entry_id)


_ENTRY_CURSOR = re.compile(ENTRY_CURSOR_FORM)


def _after_entry(token: str) -> int:
    """The entry id of a cursor of `ENTRY_CURSOR_FORM` (at most 18 digits: within a
    bigint), or 400 `invalid_cursor`."""
    if not _ENTRY_CURSOR.fullmatch(token):
        raise BadRequest("The cursor is not valid.", code="invalid_cursor")
    return int(token)


async def list_log(
    db: AsyncSession,
    admin: Principal,
    *,
    actor_user_id: uuid.UUID | None,
    target_user_id: uuid.UUID | None,
    action: str | None,
    limit: int,
    cursor: str | None,
) -> AuditLogPage:
    """The audit log of the tenant (who read or erased whose data, when, how), newest first."""
    rows = await AuditLogRepository(db, admin.tenant_id).page(
        actor_user_id=actor_user_id,
        target_user_id=target_user_id,
        action=action,
        before_id=_after_entry(cursor) if cursor else None,
        limit=limit,
    )
    items = rows[:limit]
    next_cursor = _log_cursor(items[-1].id) if len(rows) > limit and items else None
    return AuditLogPage(
        items=[AuditLogEntry.model_validate(e) for e in items], next_cursor=next_cursor
    )
