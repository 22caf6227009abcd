"""Feedback on one's own turns: another user's or tenant's turn is indistinguishable from
none (404), a turn still being answered cannot be judged yet (409)."""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.principal import Principal
from app.conversation.repository.sessions import SessionRepository
from app.conversation.repository.turns import TurnRepository
from app.core.errors import Conflict, NotFound
from app.core.on_commit import on_commit
from app.feedback.repository import FeedbackRepository
from app.feedback.schemas import FeedbackRequest
from app.models import TurnFeedback
from app.observability.metrics import FEEDBACK


async def _own_settled_turn(db: AsyncSession, principal: Principal, turn_id: uuid.UUID) -> None:
    status = await TurnRepository(db, principal.tenant_id).own_status(principal.user_id, turn_id)
    if status is None:
        raise NotFound("No such turn.", code="turn_not_found")
    if status == "pending":
        raise Conflict("The turn is still being answered.", code="turn_pending")


async def give(
    db: AsyncSession, principal: Principal, turn_id: uuid.UUID, body: FeedbackRequest
) -> TurnFeedback:
    """Store the caller's thumb (and comment) on their turn, replacing any it had; counted
    on /metrics once stored."""
    await _own_settled_turn(db, principal, turn_id)
    stored = await FeedbackRepository(db, principal.tenant_id).put(
        turn_id, principal.user_id, body.value, body.comment
    )
    on_commit(db, FEEDBACK.labels(value=body.value).inc)
    return stored


async def clear(db: AsyncSession, principal: Principal, turn_id: uuid.UUID) -> None:
    """Take the caller's feedback on their turn back."""
    await _own_settled_turn(db, principal, turn_id)
    await FeedbackRepository(db, principal.tenant_id).remove(turn_id, principal.user_id)


async def of_session(
    db: AsyncSession, principal: Principal, session_id: uuid.UUID
) -> list[TurnFeedback]:
    """The caller's feedback on their session's turns; 404 when it is not their session."""
    tenant = principal.tenant_id
    if await SessionRepository(db, tenant).owned(session_id, principal.user_id) is None:
        raise NotFound("No such session.", code="session_not_found")
    turns = await TurnRepository(db, tenant).own_ids_in(principal.user_id, session_id)
    found = await FeedbackRepository(db, tenant).of_turns(turns)
    return [found[t] for t in turns if t in found]
