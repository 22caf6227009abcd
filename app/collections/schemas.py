"""The shapes of `/admin/collections` and `/collections`."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.core.json_types import NOT_BLANK
from app.groups.schemas import NAME_MAX, clean_name

Visibility = Literal["tenant", "groups"]


class CollectionIn(BaseModel):
    """A new collection: visible to the whole tenant, or to the listed groups."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=NAME_MAX, pattern=NOT_BLANK)
    visibility: Visibility = "tenant"
    group_ids: list[uuid.UUID] = Field(default_factory=list, max_length=500)

    _name = field_validator("name")(clean_name)


class CollectionPatch(BaseModel):
    """A rename or a re-scope (fields left out stay as they are)."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, min_length=1, max_length=NAME_MAX, pattern=NOT_BLANK)
    visibility: Visibility | None = None
    group_ids: list[uuid.UUID] | None = Field(default=None, max_length=500)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        return None if value is None else clean_name(value)


class CollectionOut(BaseModel):
    """A collection, with who may see it and what it holds."""

    id: uuid.UUID
    name: str
    visibility: Visibility
    group_ids: list[uuid.UUID]
    is_default: bool
    status: Literal["active", "deleting"]
    deletion_progress: float
    documents: int
    size_bytes: int
    chunks: int
    created_at: datetime


class CollectionList(BaseModel):
    """Collections by name."""

    items: list[CollectionOut]


class VisibleCollection(BaseModel):
    """A collection the caller may search (the new chat's picker)."""

    id: uuid.UUID
    name: str
    documents: int


class VisibleCollectionList(BaseModel):
    """The collections the caller may search now."""

    items: list[VisibleCollection]


class MoveDocumentIn(BaseModel):
    """The document to move into this collection."""

    model_config = ConfigDict(extra="forbid")

    document_id: uuid.UUID


class MoveDocumentOut(BaseModel):
    """Where a document was, and where it is now."""

    document_id: uuid.UUID
    from_collection_id: uuid.UUID
    collection_id: uuid.UUID


class SessionScopeIn(BaseModel):
    """The collections a conversation retrieves from (empty: every one the user may see)."""

    model_config = ConfigDict(extra="forbid")

    collection_ids: list[uuid.UUID] = Field(max_length=200)


class SessionScopeOut(BaseModel):
    """A conversation's scope."""

    session_id: uuid.UUID
    collection_ids: list[uuid.UUID]
