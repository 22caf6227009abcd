"""`GET /kb/documents/{id}/chunks` and `/history`: the admin's document view."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query

from app.auth.principal import AdminPrincipal
from app.core.deps import DbSession
from app.core.errors import error_responses
from app.core.pagination import cursor_schema
from app.kb_inspect import service
from app.kb_inspect.schemas import ChunkPage, StatusEvent

router = APIRouter(prefix="/kb", tags=["knowledge"])


@router.get(
    "/documents/{document_id}/chunks",
    response_model=ChunkPage,
    responses=error_responses(400, 404),
)
async def list_chunks(
    document_id: uuid.UUID,
    admin: AdminPrincipal,
    db: DbSession,
    limit: Annotated[int, Query(ge=1, le=100, description="Page size")] = 20,
    cursor: Annotated[
        str | None,
        Query(
            max_length=20,
            json_schema_extra=cursor_schema(service.ORDINAL_CURSOR_FORM, "a chunk's ordinal"),
        ),
    ] = None,
) -> ChunkPage:
    """The document's chunks in reading order, as retrieval reads them (admins only)."""
    return await service.chunks(db, admin, document_id, limit=limit, cursor=cursor)


@router.get(
    "/documents/{document_id}/history",
    response_model=list[StatusEvent],
    responses=error_responses(404),
)
async def read_history(
    document_id: uuid.UUID, admin: AdminPrincipal, db: DbSession
) -> list[StatusEvent]:
    """The document's status history, newest first: the latest 50 statuses it entered, each
    with when and why (added, claimed by an attempt, failed with its error, ready with its
    chunk count, queued again). Admins only; another tenant's document is 404."""
    return await service.read_history(db, admin, document_id)
