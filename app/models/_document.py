"""Columns shared by uploaded documents (attachments and knowledge-base documents)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, DateTime, Float, Integer, LargeBinary, Text, func
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

DOCUMENT_STATUS_CHECK = "status IN ('pending', 'processing', 'ready', 'failed')"
IN_FLIGHT = "status IN ('pending', 'processing')"
"""The rows the ingestion recovery scans (a partial index each, migration 0017)."""


class DocumentColumns:
    """Mixin of the columns uploaded documents share: the file, its ingestion status and lease."""

    filename: Mapped[str | None] = mapped_column(Text)
    content_type: Mapped[str | None] = mapped_column(Text)
    size_bytes: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    content_hash: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text, default="pending", server_default="pending")
    progress: Mapped[float] = mapped_column(Float, default=0.0, server_default="0")
    error: Mapped[str | None] = mapped_column(Text)
    chunk_count: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    source: Mapped[bytes | None] = mapped_column(LargeBinary, deferred=True)
    """The uploaded file, kept to re-index it (deferred: loaded only when asked for)."""
    ingestion: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict, server_default="{}")
    """How it was ingested: pages, chunks, tokens, instructions neutralised, PII replaced."""
    claimed_by: Mapped[str | None] = mapped_column(Text)
    """The process ingesting it (`app.ingestion.leases`), while its lease holds."""
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    """Until when that claim holds unless renewed; past it, any process may take it over."""
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """Runs that claimed it since it was last queued; bounded (a document that keeps killing
    its workers ends `failed`)."""
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True),
        server_default=func.clock_timestamp(),
        onupdate=func.clock_timestamp(),
    )
