from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema

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


NewTitle = Annotated[str, Field(max_length=TITLE_MAX, pattern=NOT_BLANK)]


class UpdateSessionRequest(BaseModel):
    """A new title for a chat session, pinned or unpinned, and/or the collections its turns
    retrieve from (`[]`: every collection the user may see; ADR 0078): at least one field; a
    field left out is unchanged."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"minProperties": 1})

    # Each may be left out, none may be null (SkipJsonSchema: the document says so).
    title: NewTitle | SkipJsonSchema[None] = None
    pinned: StrictBool | SkipJsonSchema[None] = None
    """true: listed first, under "Pinned"; false: back among the others."""
    collection_ids: Annotated[list[uuid.UUID], Field(max_length=200)] | SkipJsonSchema[None] = None

    _title = field_validator("title")(_clean_title)

    @field_validator("title", "pinned", "collection_ids", mode="before")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        if value is None:
            raise ValueError("must not be null (leave it out instead)")
        return value

    @model_validator(mode="after")
    def _something(self) -> UpdateSessionRequest:
        if self.title is None and self.pinned is None and self.collection_ids is None:
            raise ValueError("give a title, pinned, collection_ids, or several")
        return self


class SessionResponse(BaseModel):
    """A chat session of the caller."""

    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    title: str
    pinned: bool = False
    """Listed first, under "Pinned" (PATCH with `pinned`)."""
    created_at: datetime
    updated_at: datetime


class UpdatedSessionResponse(SessionResponse):
    """A chat session with the collections it is restricted to (read, or after a change)."""

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
