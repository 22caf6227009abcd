from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, ConfigDict


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
    """One step of a document's ingestion, as its row records it."""

    at: datetime | None
    """When; None when the row does not record it (the time a run claimed the document)."""
    status: str
    detail: str | None = None
