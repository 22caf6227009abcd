from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.core.json_types import NO_NUL
from app.models.turn_feedback import COMMENT_MAX

FeedbackValue = Literal["up", "down"]


class FeedbackRequest(BaseModel):
    """A thumb on one of the caller's turns; it replaces any the turn had."""

    model_config = ConfigDict(extra="forbid")

    value: FeedbackValue
    comment: str | None = Field(default=None, max_length=COMMENT_MAX, pattern=NO_NUL)
    """Optional; blank is no comment."""

    @field_validator("comment")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        return value.strip() or None if value is not None else None


class FeedbackResponse(BaseModel):
    """The feedback a turn has."""

    model_config = ConfigDict(from_attributes=True)

    turn_id: uuid.UUID
    value: FeedbackValue
    comment: str | None
    created_at: datetime
    updated_at: datetime


class FeedbackList(BaseModel):
    """The caller's feedback on the turns of one conversation."""

    items: list[FeedbackResponse]
