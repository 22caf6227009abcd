from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict


class AttachmentOut(BaseModel):
    """An uploaded attachment and how far its ingestion has got."""

    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    filename: str | None
    content_type: str | None
    size_bytes: int
    status: str
    progress: float
    error: str | None
    chunk_count: int
    ingestion: dict[str, Any]
    created_at: datetime


class AttachmentList(BaseModel):
    """The attachments active in a chat session."""

    items: list[AttachmentOut]
