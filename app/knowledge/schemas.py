from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.core.json_types import json_number
from app.ingestion.extract import MARKDOWN, TEXT


class TextDocumentIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str = Field(min_length=1, max_length=300)
    text: str = Field(min_length=1, max_length=5_000_000)
    external_id: str | None = Field(default=None, max_length=300)
    metadata: dict[str, Any] = Field(default_factory=dict)
    content_type: str = Field(default=TEXT, pattern=f"^({TEXT}|{MARKDOWN})$")


class DocumentAccepted(BaseModel):
    id: uuid.UUID
    status: str
    duplicate: bool = False


class DocumentOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    title: str
    external_id: str | None
    filename: str | None
    content_type: str | None
    size_bytes: int
    status: str
    progress: float
    error: str | None
    chunk_count: int
    metadata: dict[str, Any] = Field(validation_alias="doc_metadata")
    ingestion: dict[str, Any]
    created_at: datetime
    updated_at: datetime


class DocumentPage(BaseModel):
    items: list[DocumentOut]
    next_cursor: str | None


class SearchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=4000)
    k: int = Field(default=10, ge=1, le=100)

    _number = field_validator("k", mode="before")(json_number)


class SearchHit(BaseModel):
    document_id: uuid.UUID
    external_id: str | None
    chunk_id: uuid.UUID
    title: str
    score: float
    snippet: str


class SearchOut(BaseModel):
    items: list[SearchHit]
