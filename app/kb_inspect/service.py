"""The admin's document view: chunks paged by ordinal, and the document's ingestion told as
the steps its row records."""

from __future__ import annotations

import re
import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.principal import Principal
from app.core.errors import BadRequest, NotFound
from app.kb_inspect.repository import DocumentChunks
from app.kb_inspect.schemas import ChunkOut, ChunkPage, StatusEvent
from app.models import KbDocument

ORDINAL_CURSOR_FORM = r"[0-9]{1,9}"
_CURSOR = re.compile(ORDINAL_CURSOR_FORM)


def _after(cursor: str | None) -> int | None:
    if not cursor:
        return None
    if not _CURSOR.fullmatch(cursor):
        raise BadRequest("The cursor is not valid.", code="invalid_cursor")
    return int(cursor)


async def chunks(
    db: AsyncSession, admin: Principal, document_id: uuid.UUID, *, limit: int, cursor: str | None
) -> ChunkPage:
    """A page of the document's chunks in reading order; 404 when the tenant has no such
    document."""
    store = DocumentChunks(db, admin.tenant_id)
    after = _after(cursor)
    if await store.document(document_id) is None:
        raise NotFound("No such document.", code="document_not_found")
    rows = await store.page(document_id, after=after, limit=limit)
    items = rows[:limit]
    more = len(rows) > limit and items
    return ChunkPage(
        items=[ChunkOut.model_validate(c) for c in items],
        next_cursor=str(items[-1].ordinal) if more else None,
    )


def history(document: KbDocument) -> list[StatusEvent]:
    """What the row says happened, oldest first: added, each run that claimed it, where it
    stands now. The row keeps the latest state only, so this is those facts, not a log of
    every transition."""
    events = [StatusEvent(at=document.created_at, status="pending", detail="added")]
    if document.attempts:
        runs = "1 run" if document.attempts == 1 else f"{document.attempts} runs"
        events.append(StatusEvent(at=None, status="processing", detail=f"{runs} claimed it"))
    if document.status != "pending":
        detail = document.error
        if document.status == "ready":
            detail = f"{document.chunk_count} chunks"
        elif document.status == "processing":
            detail = f"{round(document.progress * 100)} % done"
        events.append(StatusEvent(at=document.updated_at, status=document.status, detail=detail))
    return events


async def read_history(
    db: AsyncSession, admin: Principal, document_id: uuid.UUID
) -> list[StatusEvent]:
    """The document's ingestion steps; 404 when the tenant has no such document."""
    document = await DocumentChunks(db, admin.tenant_id).document(document_id)
    if document is None:
        raise NotFound("No such document.", code="document_not_found")
    return history(document)
