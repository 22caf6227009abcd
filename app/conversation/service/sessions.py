"""Session lifecycle for one principal. Another user's session is indistinguishable from none."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncSession

from app.access.repository import session_scope
from app.access.scope import set_session_scope
from app.access.withhold import withhold_sources
from app.auth.principal import Principal
from app.conversation.checkpoints.repository import delete_thread
from app.conversation.repository import TurnRepository
from app.conversation.repository.sessions import SessionRepository
from app.core.errors import NotFound
from app.core.pagination import Cursor, split_page
from app.models import ChatSession, QueryHistory

DEFAULT_TITLE = "New conversation"


class CachedHistory(Protocol):
    """The cache of a session's recent turns (the chat domain's history store)."""

    async def drop(self, tenant_id: uuid.UUID, session_id: uuid.UUID) -> None:
        """Forget the session's cached turns."""


def _repo(db: AsyncSession, principal: Principal) -> SessionRepository:
    return SessionRepository(db, principal.tenant_id)


async def get_owned(db: AsyncSession, principal: Principal, session_id: uuid.UUID) -> ChatSession:
    """The caller's session; 404 when it is unknown or someone else's."""
    found = await _repo(db, principal).owned(session_id, principal.user_id)
    if found is None:
        raise NotFound("No such session.", code="session_not_found")
    return found


async def get_owned_with_scope(
    db: AsyncSession, principal: Principal, session_id: uuid.UUID
) -> tuple[ChatSession, list[uuid.UUID]]:
    """The caller's session and the collections it is restricted to; 404 as `get_owned`."""
    chat = await get_owned(db, principal, session_id)
    return chat, await session_scope(db, principal.tenant_id, session_id)


async def create(db: AsyncSession, principal: Principal, title: str | None) -> ChatSession:
    """Start a session for the caller (default title unless one is given)."""
    chat = ChatSession(user_id=principal.user_id, title=title or DEFAULT_TITLE)
    _repo(db, principal).add(chat)
    await db.flush()
    await db.refresh(chat)
    return chat


async def update(
    db: AsyncSession,
    principal: Principal,
    session_id: uuid.UUID,
    *,
    title: str | None = None,
    pinned: bool | None = None,
    collection_ids: Sequence[uuid.UUID] | None = None,
) -> tuple[ChatSession, list[uuid.UUID]]:
    """Retitle, pin or unpin one of the caller's sessions, and/or set the collections it
    retrieves from (None: left as it is); the session and its scope. Pinning a pinned
    session keeps the time it was first pinned."""
    chat = await get_owned(db, principal, session_id)
    if collection_ids is not None:
        await set_session_scope(
            db, principal.tenant_id, principal.user_id, session_id, collection_ids
        )
    if title is not None:
        chat.title = title
    if pinned is not None and pinned != (chat.pinned_at is not None):
        chat.pinned_at = datetime.now(UTC) if pinned else None
    await db.flush()
    await db.refresh(chat)
    return chat, await session_scope(db, principal.tenant_id, session_id)


async def delete(
    db: AsyncSession, history: CachedHistory, principal: Principal, session_id: uuid.UUID
) -> None:
    """Delete the session and its checkpoints; turns and attachment links go with it
    (ON DELETE CASCADE), and its cached history is dropped."""
    chat = await get_owned(db, principal, session_id)
    await delete_thread(db, session_id)
    await _repo(db, principal).delete(chat)
    await db.flush()
    await history.drop(principal.tenant_id, session_id)


async def list_page(
    db: AsyncSession,
    principal: Principal,
    *,
    limit: int,
    cursor: str | None,
    q: str | None = None,
    pinned: bool | None = None,
) -> tuple[list[ChatSession], str | None]:
    """One page of the caller's sessions (those matching `q` when given: title or the text
    of a turn; only the pinned or the unpinned ones with `pinned`) and the next's cursor."""
    after = Cursor.decode(cursor) if cursor else None
    rows = await _repo(db, principal).page(
        principal.user_id, limit=limit, after=after, q=q, pinned=pinned
    )
    return split_page(rows, limit)


async def turns_page(
    db: AsyncSession,
    principal: Principal,
    session_id: uuid.UUID,
    *,
    limit: int,
    cursor: str | None,
) -> tuple[list[QueryHistory], str | None]:
    """One page of a session's turns and the cursor of the next."""
    await get_owned(db, principal, session_id)
    after = Cursor.decode(cursor) if cursor else None
    rows = await TurnRepository(db, principal.tenant_id).page(session_id, limit=limit, after=after)
    items, next_cursor = split_page(rows, limit)
    # Sources of documents the caller may no longer see are withheld (ADR 0078); the rows
    # shown so are detached first, so the stored record is never changed.
    shown = await withhold_sources(db, principal.tenant_id, [t.context_metadata for t in items])
    for turn, manifest in zip(items, shown, strict=True):
        if manifest is not turn.context_metadata:
            db.expunge(turn)
            turn.context_metadata = manifest
    return items, next_cursor
