from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, ConfigDict

from app.conversation.turn.manifest import Manifest
from app.core.json_types import JsonObject
from app.feedback.schemas import FeedbackValue


class AuditFeedback(BaseModel):
    """The thumb the turn's user gave it, and their comment."""

    model_config = ConfigDict(from_attributes=True)

    value: FeedbackValue
    comment: str | None
    updated_at: datetime


class AuditTurn(BaseModel):
    """One turn in an audit listing: who, when, and how its context was built, without the text."""

    model_config = ConfigDict(from_attributes=True)

    turn_id: uuid.UUID
    session_id: uuid.UUID
    user_id: uuid.UUID
    created_at: datetime
    status: str
    query_composition: str | None
    context_metadata: Manifest
    """The turn's manifest as stored, the admin audit's part included."""
    feedback: AuditFeedback | None = None
    """The user's thumb on the answer (POST /chat/{turn_id}/feedback); None: none given."""


class AuditTurnPage(BaseModel):
    """A page of audited turns, newest first; `next_cursor` fetches the next."""

    items: list[AuditTurn]
    next_cursor: str | None


class AuditTurnRecord(AuditTurn):
    """One turn in full: what was asked, answered, and how its context was built."""

    user_query: str
    answer: str
    attachment_ids: list[uuid.UUID]
    model: str | None
    prompt_tokens: int
    completion_tokens: int
    latency_ms: int | None
    completed_at: datetime | None


class AuditLogEntry(BaseModel):
    """One administrative action recorded in the audit log."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    actor_user_id: uuid.UUID
    action: str
    target_user_id: uuid.UUID | None
    resource: str | None
    details: JsonObject
    created_at: datetime


class AuditLogPage(BaseModel):
    """A page of audit-log entries, newest first; `next_cursor` fetches the next."""

    items: list[AuditLogEntry]
    next_cursor: str | None
