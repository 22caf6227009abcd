"""Feedback on one's own turns: another user's or tenant's turn is indistinguishable from
none (404), a turn still being answered cannot be judged yet (409)."""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.principal import Principal
from app.core.errors import Conflict, NotFound
from app.core.on_commit import on_commit
from app.feedback.repository import FeedbackRepository
from app.feedback.schemas import FeedbackRequest
from app.models import TurnFeedback
from app.observability.metrics import FEEDBACK


async def _own_settled_turn(
    repo: FeedbackRepository, principal: Principal, turn_id: uuid.UUID
) -> None:
    status = await repo.own_turn_status(turn_id, principal.user_id)
    if status is None:
        raise NotFound("No such turn.", code="turn_not_found")
    if status == "pending":
        raise Conflict("The turn is still being answered.", code="turn_pending")


async def give(
    db: AsyncSession, principal: Principal, turn_id: uuid.UUID, body: FeedbackRequest
) -> TurnFeedback:
    """Store the caller's thumb (and comment) on their turn, replacing any it had; counted
    on /metrics once stored."""
    repo = FeedbackRepository(db, principal.tenant_id)
    await _own_settled_turn(repo, principal, turn_id)
    stored = await repo.put(turn_id, principal.user_id, body.value, body.comment)
    on_commit(db, FEEDBACK.labels(value=body.value).inc)
    return stored


async def clear(db: AsyncSession, principal: Principal, turn_id: uuid.UUID) -> None:
    """Take the caller's feedback on their turn back."""
    repo = FeedbackRepository(db, principal.tenant_id)
    await _own_settled_turn(repo, principal, turn_id)
    await repo.remove(turn_id, principal.user_id)


async def of_session(
    db: AsyncSession, principal: Principal, session_id: uuid.UUID
) -> list[TurnFeedback]:
    """The caller's feedback on their session's turns; 404 when it is not their session."""
    repo = FeedbackRepository(db, principal.tenant_id)
    if not await repo.owns_session(session_id, principal.user_id):
        raise NotFound("No such session.", code="session_not_found")
    return await repo.of_session(session_id, principal.user_id)
