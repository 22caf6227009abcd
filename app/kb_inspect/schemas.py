from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field


class ChunkOut(BaseModel):
    """One chunk of a document: its place, its heading path, its text and its size."""

    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    ordinal: int
    title: str
    text: str
    token_count: int


class ChunkPage(BaseModel):
    """A page of a document's chunks in reading order; `next_cursor` fetches the next."""

    items: list[ChunkOut]
    next_cursor: str | None


class StatusEvent(BaseModel):
    """One status the document entered: when, which, and why or with what result."""

    model_config = ConfigDict(from_attributes=True)

    at: datetime = Field(
        validation_alias=AliasChoices("at", "created_at"), description="When it entered it."
    )
    status: Literal["pending", "processing", "ready", "failed"] = Field(
        description="The status it entered."
    )
    detail: str | None = Field(
        default=None,
        description=(
            "The error of a failure, a ready document's chunk count, the attempt that claimed "
            "it, or why it was queued again; null when there is nothing to add."
        ),
        examples=["3 chunks", "attempt 2", "The file is missing."],
    )
