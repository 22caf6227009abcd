"""Session lifecycle for one principal. Another user's session is indistinguishable from none."""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.principal import Principal
from app.core.errors import NotFound
from app.core.pagination import Cursor, split_page
from app.models import ChatSession, QueryHistory
from app.sessions.repository import SessionRepository, delete_checkpoints
from app.turns.repository import TurnRepository

DEFAULT_TITLE = "New conversation"


def _repo(session: AsyncSession, principal: Principal) -> SessionRepository:
    return SessionRepository(session, principal.tenant_id)


async def get_owned(
    session: AsyncSession, principal: Principal, session_id: uuid.UUID
) -> ChatSession:
    found = await _repo(session, principal).owned(session_id, principal.user_id)
    if found is None:
        raise NotFound("No such session.", code="session_not_found")
    return found


async def create(session: AsyncSession, principal: Principal, title: str | None) -> ChatSession:
    chat = ChatSession(user_id=principal.user_id, title=title or DEFAULT_TITLE)
    _repo(session, principal).add(chat)
    await session.flush()
    await session.refresh(chat)
    return chat


async def rename(
    session: AsyncSession, principal: Principal, session_id: uuid.UUID, title: str
) -> ChatSession:
    chat = await get_owned(session, principal, session_id)
    chat.title = title
    await session.flush()
    await session.refresh(chat)
    return chat


async def delete(session: AsyncSession, principal: Principal, session_id: uuid.UUID) -> None:
    """Delete the session and its checkpoints; turns and attachment links go with it
    (ON DELETE CASCADE)."""
    chat = await get_owned(session, principal, session_id)
    await delete_checkpoints(session, session_id)
    await _repo(session, principal).delete(chat)
    await session.flush()


async def list_page(
    session: AsyncSession, principal: Principal, *, limit: int, cursor: str | None
) -> tuple[list[ChatSession], str | None]:
    after = Cursor.decode(cursor) if cursor else None
    rows = await _repo(session, principal).page(principal.user_id, limit=limit, after=after)
    return split_page(rows, limit)


async def turns_page(
    session: AsyncSession,
    principal: Principal,
    session_id: uuid.UUID,
    *,
    limit: int,
    cursor: str | None,
) -> tuple[list[QueryHistory], str | None]:
    await get_owned(session, principal, session_id)
    after = Cursor.decode(cursor) if cursor else None
    rows = await TurnRepository(session, principal.tenant_id).page(
        session_id, limit=limit, after=after
    )
    return split_page(rows, limit)
