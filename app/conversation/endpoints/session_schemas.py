from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.conversation.turn.manifest import Manifest
from app.core.json_types import NOT_BLANK

TITLE_MAX = 200


def _clean_title(value: str | None) -> str | None:
    if value is None:
        return None
    cleaned = " ".join(value.split())
    if not cleaned:
        raise ValueError("the title must not be blank")
    return cleaned


class CreateSessionRequest(BaseModel):
    """A new chat session, optionally titled."""

    model_config = ConfigDict(extra="forbid")

    title: str | None = Field(default=None, max_length=TITLE_MAX, pattern=NOT_BLANK)

    _title = field_validator("title")(_clean_title)


class UpdateSessionRequest(BaseModel):
    """A new title for a chat session, and/or the collections its turns retrieve from
    (`[]`: every collection the user may see; ADR 0078). A field left out is unchanged."""

    model_config = ConfigDict(extra="forbid")

    title: str | None = Field(default=None, max_length=TITLE_MAX, pattern=NOT_BLANK)
    collection_ids: list[uuid.UUID] | None = Field(default=None, max_length=200)

    _title = field_validator("title")(_clean_title)


class SessionResponse(BaseModel):
    """A chat session of the caller."""

    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    title: str
    created_at: datetime
    updated_at: datetime


class UpdatedSessionResponse(SessionResponse):
    """A chat session after a change, with the collections it is restricted to."""

    collection_ids: list[uuid.UUID]
    """Empty: not restricted (every collection the user may see)."""


class SessionPage(BaseModel):
    """A page of chat sessions, newest first; `next_cursor` fetches the next."""

    items: list[SessionResponse]
    next_cursor: str | None


class TurnResponse(BaseModel):
    """One turn of a chat session: the question, the answer and its status."""

    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    user_query: str
    answer: str
    query_composition: str | None
    status: str
    created_at: datetime
    context_metadata: Manifest = Field(default_factory=Manifest)
    """How the answer's context was built (budget, sources used, quality); the output
    validation's audit detail stays for the admin audit."""

    @field_validator("context_metadata", mode="before")
    @classmethod
    def _without_audit(cls, value: Any) -> Manifest:
        return (value if isinstance(value, Manifest) else Manifest.read(value)).public()


class TurnPage(BaseModel):
    """A page of a session's turns, newest first; `next_cursor` fetches the next."""

    items: list[TurnResponse]
    next_cursor: str | None
