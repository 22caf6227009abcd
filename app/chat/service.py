"""Prepares a turn for the runner: the session must be the caller's (checked before any
checkpoint of the thread is read)."""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.principal import Principal
from app.chat.runner import PreparedTurn
from app.chat.schemas import ChatRequest
from app.sessions import service as sessions


async def prepare_turn(
    session: AsyncSession, principal: Principal, body: ChatRequest
) -> PreparedTurn:
    await sessions.get_owned(session, principal, body.session_id)  # 404 if not the caller's
    return PreparedTurn(
        tenant_id=principal.tenant_id,
        user_id=principal.user_id,
        session_id=body.session_id,
        turn_id=uuid.uuid4(),
        messages=body.conversation(),
        attachment_ids=list(dict.fromkeys(body.attachment_ids)),
    )
