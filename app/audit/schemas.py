from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict


class AuditTurn(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    turn_id: uuid.UUID
    session_id: uuid.UUID
    user_id: uuid.UUID
    created_at: datetime
    status: str
    query_composition: str | None
    context_metadata: dict[str, Any]


class AuditTurnPage(BaseModel):
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
    model_config = ConfigDict(from_attributes=True)

    id: int
    actor_user_id: uuid.UUID
    action: str
    target_user_id: uuid.UUID | None
    resource: str | None
    details: dict[str, Any]
    created_at: datetime


class AuditLogPage(BaseModel):
    items: list[AuditLogEntry]
    next_cursor: str | None
