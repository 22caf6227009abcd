"""/sessions: a user's chat sessions (create, list, read, rename, delete) and their turns."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query, status

from app.auth.principal import CurrentPrincipal
from app.conversation.endpoints.session_deps import HistoryDep
from app.conversation.endpoints.session_schemas import (
    CreateSessionRequest,
    SessionPage,
    SessionResponse,
    TurnPage,
    TurnResponse,
    UpdatedSessionResponse,
    UpdateSessionRequest,
)
from app.conversation.service import sessions as service
from app.core.deps import DbSession
from app.core.errors import error_responses
from app.core.json_types import NO_NUL
from app.core.pagination import CURSOR_FORM, cursor_schema

router = APIRouter(prefix="/sessions", tags=["sessions"])

Limit = Annotated[int, Query(ge=1, le=100, description="Page size")]
CursorParam = Annotated[
    str | None, Query(max_length=200, json_schema_extra=cursor_schema(CURSOR_FORM, "opaque"))
]
SearchParam = Annotated[
    str | None,
    Query(
        max_length=200,
        pattern=NO_NUL,
        description="Only sessions whose title, or a question or answer of theirs, contains "
        "this text (case-insensitive)",
    ),
]


@router.post("", response_model=SessionResponse, status_code=status.HTTP_201_CREATED)
async def create_session(
    principal: CurrentPrincipal, db: DbSession, body: CreateSessionRequest | None = None
) -> SessionResponse:
    """Start a chat session for the caller."""
    chat = await service.create(db, principal, body.title if body else None)
    return SessionResponse.model_validate(chat)


@router.get("", response_model=SessionPage, responses=error_responses(400))
async def list_sessions(
    principal: CurrentPrincipal,
    db: DbSession,
    limit: Limit = 20,
    cursor: CursorParam = None,
    q: SearchParam = None,
    pinned: Annotated[
        bool | None, Query(description="Only the pinned sessions (true) or the others (false)")
    ] = None,
) -> SessionPage:
    """The caller's sessions, newest first; with `q`, those whose title or turns contain it;
    with `pinned`, only the pinned ones or only the others (the web app lists the pinned
    first, under "Pinned")."""
    text = q.strip() if q else None
    items, next_cursor = await service.list_page(
        db, principal, limit=limit, cursor=cursor, q=text or None, pinned=pinned
    )
    return SessionPage(
        items=[SessionResponse.model_validate(s) for s in items], next_cursor=next_cursor
    )


@router.get("/{session_id}", response_model=UpdatedSessionResponse)
async def read_session(
    session_id: uuid.UUID, principal: CurrentPrincipal, db: DbSession
) -> UpdatedSessionResponse:
    """One of the caller's sessions, with the collections its turns are restricted to (the
    web app shows them when the conversation is reopened)."""
    chat, scope = await service.get_owned_with_scope(db, principal, session_id)
    return UpdatedSessionResponse(
        **SessionResponse.model_validate(chat).model_dump(), collection_ids=scope
    )


@router.patch(
    "/{session_id}", response_model=UpdatedSessionResponse, responses=error_responses(404)
)
async def update_session(
    session_id: uuid.UUID,
    body: UpdateSessionRequest,
    principal: CurrentPrincipal,
    db: DbSession,
) -> UpdatedSessionResponse:
    """Retitle, pin or unpin one of the caller's sessions, and/or restrict the collections its
    turns retrieve from (`collection_ids`; `[]` lifts the restriction)."""
    chat, scope = await service.update(
        db,
        principal,
        session_id,
        title=body.title,
        pinned=body.pinned,
        collection_ids=body.collection_ids,
    )
    return UpdatedSessionResponse(
        **SessionResponse.model_validate(chat).model_dump(), collection_ids=scope
    )


@router.delete("/{session_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_session(
    session_id: uuid.UUID, principal: CurrentPrincipal, db: DbSession, history: HistoryDep
) -> None:
    """Delete the session with its turns, attachment links, checkpoints and cached history."""
    await service.delete(db, history, principal, session_id)


@router.get("/{session_id}/turns", response_model=TurnPage, responses=error_responses(400))
async def list_turns(
    session_id: uuid.UUID,
    principal: CurrentPrincipal,
    db: DbSession,
    limit: Limit = 20,
    cursor: CursorParam = None,
) -> TurnPage:
    """The session's turns, newest first."""
    items, next_cursor = await service.turns_page(
        db, principal, session_id, limit=limit, cursor=cursor
    )
    return TurnPage(items=[TurnResponse.model_validate(t) for t in items], next_cursor=next_cursor)
