"""Ingest one document or attachment: extract → sanitise → chunk → embed → index.

Status moves `pending → processing → ready | failed`, with `progress` (0 to 1) committed as
batches are embedded and a readable `error` on failure. Chunks are written in the same
transaction that marks the document ready, so a reader never sees half an index; a retry
replaces whatever an earlier attempt wrote.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.db import TENANT
from app.embeddings.base import Embedder
from app.embeddings.batching import CoalescingEmbedder
from app.ingestion.chunking import chunk_text
from app.ingestion.extract import PDF, ExtractionError, extract_text
from app.ingestion.safety import neutralise_instructions
from app.models import Attachment, AttachmentChunk, KbChunk, KbDocument
from app.privacy.pii import anonymize

logger = logging.getLogger(__name__)

Kind = Literal["kb", "attachment"]
EMBED_BATCH = 64
MAX_ATTEMPTS = 3


@dataclass
class IngestionDeps:
    sessionmaker: async_sessionmaker[AsyncSession]
    embedder: Embedder
    pii_anonymize: bool
    chunk_tokens: int = 400
    chunk_overlap: int = 60
    batches: CoalescingEmbedder = field(init=False)
    """Chunks of documents ingested concurrently share the embedder's batches."""

    def __post_init__(self) -> None:
        self.batches = CoalescingEmbedder(self.embedder, max_batch=EMBED_BATCH)
        limit = self.embedder.max_input_tokens
        if limit is not None and limit < self.chunk_tokens:  # chunks the model reads whole
            self.chunk_tokens = limit
            self.chunk_overlap = min(self.chunk_overlap, limit // 4)


class _Failed(Exception):
    """A permanent failure: recorded, not retried."""


class _Deleted(Exception):
    """The document was deleted while it was being ingested."""


def _models(kind: Kind) -> tuple[Any, Any, Any]:
    if kind == "kb":
        return KbDocument, KbChunk, KbChunk.document_id
    return Attachment, AttachmentChunk, AttachmentChunk.attachment_id


async def _set(
    deps: IngestionDeps, kind: Kind, tenant: uuid.UUID, oid: uuid.UUID, **values: Any
) -> None:
    model = _models(kind)[0]
    async with deps.sessionmaker() as db, db.begin():
        db.info[TENANT] = tenant
        await db.execute(
            update(model).where(model.tenant_id == tenant, model.id == oid).values(**values)
        )


async def ingest(deps: IngestionDeps, kind: Kind, tenant: uuid.UUID, oid: uuid.UUID) -> str:
    """Run the pipeline with retries on transient errors; returns the final status."""
    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            await _ingest_once(deps, kind, tenant, oid)
            return "ready"
        except _Deleted:
            return "deleted"
        except _Failed as exc:
            await _set(deps, kind, tenant, oid, status="failed", error=str(exc), progress=1.0)
            return "failed"
        except Exception as exc:  # transient (database, embedder endpoint): try again
            logger.warning(
                "ingestion attempt failed",
                extra={"kind": kind, "id": str(oid), "attempt": attempt},
                exc_info=True,
            )
            if attempt == MAX_ATTEMPTS:
                message = f"Ingestion failed after {attempt} attempts: {type(exc).__name__}"
                await _set(deps, kind, tenant, oid, status="failed", error=message, progress=1.0)
                return "failed"
            await asyncio.sleep(0.5 * 2**attempt)
    return "failed"


async def _ingest_once(deps: IngestionDeps, kind: Kind, tenant: uuid.UUID, oid: uuid.UUID) -> None:
    model, chunk_model, parent = _models(kind)
    async with deps.sessionmaker() as db, db.begin():
        db.info[TENANT] = tenant
        row = (
            await db.execute(
                select(model.source, model.content_type).where(
                    model.tenant_id == tenant, model.id == oid
                )
            )
        ).one_or_none()
        if row is None:
            raise _Deleted
        await db.execute(
            update(model)
            .where(model.tenant_id == tenant, model.id == oid)
            .values(status="processing", progress=0.05, error=None)
        )
    source, content_type = row
    if source is None:
        raise _Failed("The file is missing.")
    try:
        if content_type == PDF:  # parsing a PDF is CPU work: off the event loop
            raw_text, pages = await asyncio.to_thread(extract_text, source, content_type)
        else:
            raw_text, pages = extract_text(source, content_type)
    except ExtractionError as exc:
        raise _Failed(str(exc)) from exc

    sanitised = neutralise_instructions(raw_text)
    text = sanitised.text
    pii: dict[str, int] = {}
    if kind == "attachment" and deps.pii_anonymize:
        anonymised = anonymize(text)
        text, pii = anonymised.text, dict(anonymised.found)
    chunks = chunk_text(text, max_tokens=deps.chunk_tokens, overlap_tokens=deps.chunk_overlap)
    if not chunks:
        raise _Failed("The document contains no text.")
    batched = len(chunks) > EMBED_BATCH  # progress is worth a write only for long documents
    if batched:
        await _set(deps, kind, tenant, oid, progress=0.15)

    vectors: list[list[float]] = []
    for start in range(0, len(chunks), EMBED_BATCH):
        batch = chunks[start : start + EMBED_BATCH]
        vectors += await deps.batches.embed([c.text for c in batch])
        done = start + len(batch)
        if batched and done < len(chunks):
            progress = round(0.15 + 0.8 * done / len(chunks), 3)
            await _set(deps, kind, tenant, oid, progress=progress)

    details = {
        "pages": pages,
        "chunks": len(chunks),
        "tokens": sum(c.tokens for c in chunks),
        "instructions_neutralised": sanitised.injections,
        "pii_replaced": pii,
        "embedder": deps.embedder.name,
    }
    async with deps.sessionmaker() as db, db.begin():
        db.info[TENANT] = tenant
        await db.execute(delete(chunk_model).where(chunk_model.tenant_id == tenant, parent == oid))
        await _write_chunks(db, chunk_model, parent.key, tenant, oid, chunks, vectors)
        values: dict[str, Any] = {
            "status": "ready",
            "progress": 1.0,
            "chunk_count": len(chunks),
            "ingestion": details,
            "error": None,
        }
        if kind == "attachment":
            values["text"] = text
        await db.execute(
            update(model).where(model.tenant_id == tenant, model.id == oid).values(**values)
        )


async def _write_chunks(
    db: AsyncSession,
    chunk_model: Any,
    parent_key: str,
    tenant: uuid.UUID,
    oid: uuid.UUID,
    chunks: Sequence[Any],
    vectors: Sequence[list[float]],
) -> None:
    rows = [
        {
            "tenant_id": tenant,
            "id": uuid.uuid4(),
            parent_key: oid,
            "ordinal": chunk.ordinal,
            "text": chunk.text,
            "token_count": chunk.tokens,
            "embedding": vector,
        }
        for chunk, vector in zip(chunks, vectors, strict=True)
    ]
    # One multi-row INSERT per 1,000 chunks (not executemany, which would fire the statement
    # trigger that keeps the BM25 statistics once per row and lock their words piecemeal).
    for start in range(0, len(rows), 1000):
        await db.execute(chunk_model.__table__.insert().values(rows[start : start + 1000]))
