"""The admin's document view: chunks paged by ordinal, and the document's status history
(`kb_document_events`, ADR 0088)."""

from __future__ import annotations

import re
import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.principal import Principal
from app.core.errors import BadRequest, NotFound
from app.kb_inspect.repository import DocumentChunks
from app.kb_inspect.schemas import ChunkOut, ChunkPage, StatusEvent

ORDINAL_CURSOR_FORM = r"[0-9]{1,9}"
HISTORY_LIMIT = 50
"""Events shown: a document re-queued over and over keeps its whole history in the table,
the page shows the latest."""
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


async def read_history(
    db: AsyncSession, admin: Principal, document_id: uuid.UUID
) -> list[StatusEvent]:
    """The document's latest `HISTORY_LIMIT` status events, newest first; 404 when the
    tenant has no such document."""
    store = DocumentChunks(db, admin.tenant_id)
    if await store.document(document_id) is None:
        raise NotFound("No such document.", code="document_not_found")
    return [StatusEvent.model_validate(e) for e in await store.events(document_id, HISTORY_LIMIT)]
