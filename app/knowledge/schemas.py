from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.config import JsonDict

from app.core.json_types import (
    JSON_OBJECT_WITHOUT_NUL,
    NO_NUL,
    TEXT_FILE_PATTERN,
    json_number,
)
from app.core.location import Location
from app.core.text import snippet
from app.ingestion.extract import MARKDOWN, TEXT
from app.retrieval.base import Hit

LANGUAGE_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
"""A text-search configuration's name as PostgreSQL spells them (checked against its list)."""
BUILT_IN_LANGUAGES = [
    "arabic",
    "armenian",
    "basque",
    "catalan",
    "danish",
    "dutch",
    "english",
    "estonian",
    "finnish",
    "french",
    "german",
    "greek",
    "hindi",
    "hungarian",
    "indonesian",
    "irish",
    "italian",
    "lithuanian",
    "nepali",
    "norwegian",
    "portuguese",
    "romanian",
    "russian",
    "serbian",
    "simple",
    "spanish",
    "swedish",
    "tamil",
    "turkish",
    "yiddish",
]
"""PostgreSQL 18's built-in text-search configurations: what the API documents; the server
checks against the database's own list (`pg_ts_config`), 422 `unknown_language`."""
LANGUAGE_SCHEMA: JsonDict = {"enum": list(BUILT_IN_LANGUAGES)}
COLLECTION_DESCRIPTION = (
    "The collection the document goes into (`GET /admin/collections` lists them); omitted: "
    "the tenant's default collection. 404 `collection_not_found`, and nothing stored, for a "
    "collection the caller may not see, another tenant's, or one deleted or being deleted. "
    "A duplicate of an existing document stays in that document's collection."
)


class TextDocumentIn(BaseModel):
    """A knowledge-base document sent as text rather than as a file."""

    model_config = ConfigDict(extra="forbid")

    title: str = Field(min_length=1, max_length=300, pattern=NO_NUL)
    # The code answers other text with its own 415 `unsupported_file_type` (as for a file).
    text: str = Field(
        min_length=1, max_length=5_000_000, json_schema_extra={"pattern": TEXT_FILE_PATTERN}
    )
    external_id: str | None = Field(default=None, max_length=300, pattern=NO_NUL)
    metadata: dict[str, Any] = Field(
        default_factory=dict, json_schema_extra=JSON_OBJECT_WITHOUT_NUL
    )
    content_type: str = Field(default=TEXT, pattern=f"^({TEXT}|{MARKDOWN})$")
    language: str | None = Field(
        default=None, max_length=63, pattern=LANGUAGE_NAME, json_schema_extra=LANGUAGE_SCHEMA
    )
    """The document's own text-search language (`GET /admin/settings` lists them); none:
    the tenant's."""
    collection_id: uuid.UUID | None = Field(default=None, description=COLLECTION_DESCRIPTION)


class DocumentAccepted(BaseModel):
    """A document accepted for ingestion; `duplicate` when the same content already exists."""

    id: uuid.UUID
    status: str
    duplicate: bool = False
    collection_id: uuid.UUID
    """The collection the document is in (a duplicate stays in its own)."""


class DocumentOut(BaseModel):
    """A knowledge-base document and how far its ingestion has got."""

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
    collection_id: uuid.UUID
    """The collection the document is in (who may search it)."""
    language: str | None = None
    """The document's own text-search language; null: the tenant's."""
    metadata: dict[str, Any] = Field(validation_alias="doc_metadata")
    ingestion: dict[str, Any]
    created_at: datetime
    updated_at: datetime


class DocumentPage(BaseModel):
    """A page of documents, newest first; `next_cursor` fetches the next."""

    items: list[DocumentOut]
    next_cursor: str | None


class SearchIn(BaseModel):
    """A search of the tenant's knowledge base."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=4000, pattern=NO_NUL)
    k: int = Field(default=10, ge=1, le=100)

    _number = field_validator("k", mode="before")(json_number)


class SearchHit(BaseModel):
    """One matching passage of a document, with its score."""

    document_id: uuid.UUID
    external_id: str | None
    chunk_id: uuid.UUID
    title: str
    score: float
    snippet: str
    location: Location = Field(default_factory=Location)
    """Where the passage is in its document (page, slide, sheet and rows, section,
    chapter: only the keys that apply); `{}` when unknown."""


class SearchOut(BaseModel):
    """The passages that match a search, best first."""

    items: list[SearchHit]

    @classmethod
    def of(cls, hits: Sequence[Hit]) -> SearchOut:
        """The search's answer for these hits (`/kb/search` and the MCP `search_knowledge`)."""
        return cls(
            items=[
                SearchHit(
                    document_id=uuid.UUID(hit.passage.source_id),
                    external_id=hit.external_id,
                    chunk_id=uuid.UUID(hit.passage.id),
                    title=hit.passage.title,
                    score=hit.passage.score,
                    snippet=snippet(hit.passage.text),
                    location=hit.passage.location,
                )
                for hit in hits
            ]
        )


class TopicOut(BaseModel):
    """One document of the knowledge base: its title and a few of its headings."""

    model_config = ConfigDict(from_attributes=True)

    title: str
    headings: list[str]


class OverviewOut(BaseModel):
    """What the knowledge base covers: how many documents are ready, the newest as topics,
    and up to three questions drawn from their headings."""

    model_config = ConfigDict(from_attributes=True)

    documents: int
    topics: list[TopicOut]
    suggestions: list[str]


class TenantSettingsIn(BaseModel):
    """A tenant's settings an admin may set: its text-search language."""

    model_config = ConfigDict(extra="forbid")

    language: str = Field(max_length=63, pattern=LANGUAGE_NAME, json_schema_extra=LANGUAGE_SCHEMA)
    """One of PostgreSQL's built-in text-search configurations (english, dutch, german,
    italian, french, spanish, portuguese, simple…)."""


class LexicalIndexOut(BaseModel):
    """How far the tenant's chunks are analysed with its language."""

    language: str
    status: str
    """`ready`, or `rebuilding` while chunks are still analysed with another language."""
    chunks: int
    """The chunks that follow the tenant's language (not those of a document with its own)."""
    analysed: int
    progress: float


class TenantSettingsOut(BaseModel):
    """The tenant's language, the languages it may choose, and its lexical index."""

    language: str
    languages: list[str]
    lexical_index: LexicalIndexOut
