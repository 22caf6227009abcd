"""`POST|DELETE /chat/{turn_id}/feedback` and `GET /sessions/{session_id}/feedback`."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, status

from app.auth.principal import CurrentPrincipal
from app.core.deps import DbSession
from app.core.errors import error_responses
from app.feedback import service
from app.feedback.schemas import FeedbackList, FeedbackRequest, FeedbackResponse

router = APIRouter(tags=["chat"])


@router.post(
    "/chat/{turn_id}/feedback",
    response_model=FeedbackResponse,
    responses=error_responses(404, 409),
)
async def give_feedback(
    turn_id: uuid.UUID, body: FeedbackRequest, principal: CurrentPrincipal, db: DbSession
) -> FeedbackResponse:
    """Thumbs up or down on one of the caller's turns, with an optional comment; a second
    one replaces the first. 404 for a turn that is not the caller's; 409 while it runs."""
    return FeedbackResponse.model_validate(await service.give(db, principal, turn_id, body))


@router.delete(
    "/chat/{turn_id}/feedback",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=error_responses(404, 409),
)
async def clear_feedback(turn_id: uuid.UUID, principal: CurrentPrincipal, db: DbSession) -> None:
    """Take back the caller's feedback on their turn."""
    await service.clear(db, principal, turn_id)


@router.get(
    "/sessions/{session_id}/feedback",
    response_model=FeedbackList,
    tags=["sessions"],
    responses=error_responses(404),
)
async def session_feedback(
    session_id: uuid.UUID, principal: CurrentPrincipal, db: DbSession
) -> FeedbackList:
    """The caller's feedback on the turns of one of their sessions (the chat page shows it)."""
    items = await service.of_session(db, principal, session_id)
    return FeedbackList(items=[FeedbackResponse.model_validate(f) for f in items])
