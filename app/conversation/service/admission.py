"""Admits a turn for the runner: the session must be the caller's (checked before any
checkpoint of the thread is read), and the turn is recorded `pending` in the admission's
transaction (app/conversation/service/chat.py), so a disconnect or a failure later leaves it marked
incomplete or failed, never a silent gap. A request naming an attachment that is not the
caller's is refused before that: a 404 stores nothing."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

from sqlalchemy.ext.asyncio import AsyncSession

from app.access.scope import restrict_to_user
from app.auth.principal import Principal
from app.config import Settings
from app.conversation.pipeline.runner import PreparedTurn
from app.conversation.repository import SessionStateRepository, TurnRepository
from app.conversation.turn.schemas import ChatRequest
from app.core.db import visible_collections
from app.core.errors import NotFound
from app.pii.detect import anonymize

# Work that commits with the turn's admission or not at all, run once the limits admitted the
# request: e.g. opening the session the turn goes into (app/openai_compat, app/mcp_server).
Opening = Callable[[AsyncSession], Awaitable[None]] | None


async def prepare_turn(
    db: AsyncSession,
    principal: Principal,
    body: ChatRequest,
    settings: Settings,
    turn_id: uuid.UUID,
    idempotency_key: str | None = None,
) -> PreparedTurn:
    """Record the turn `pending` (404 for a session or an attachment not the caller's)."""
    messages = body.conversation()
    query = messages[-1]["content"]
    requested = list(dict.fromkeys(body.attachment_ids))
    await _require_own_attachments(db, principal, requested)
    stored_query = anonymize(query).text if settings.pii_anonymize else query
    admitted = await TurnRepository(db, principal.tenant_id).admit(
        turn_id=turn_id,
        session_id=body.session_id,
        user_id=principal.user_id,
        user_query=stored_query,
        attachment_ids=requested,
        lease_seconds=settings.turn_lease_seconds,
        idempotency_key=idempotency_key,
    )
    if admitted is None:  # unknown and foreign alike
        raise NotFound("No such session.", code="session_not_found")
    # What the turn may search: read with the request (authentication narrowed its
    # transaction, ADR 0078), never cached beyond it, within the session's scope.
    visible = visible_collections(db)
    if visible is None:  # a transaction of the turn's own: not narrowed yet
        visible = await restrict_to_user(
            db, principal.tenant_id, principal.user_id, is_admin=principal.is_admin
        )
    scope = set(admitted.scope)
    return PreparedTurn(
        tenant_id=principal.tenant_id,
        user_id=principal.user_id,
        session_id=body.session_id,
        turn_id=turn_id,
        messages=messages,
        attachment_ids=requested,
        session_attachment_ids=admitted.active,
        stored_query=stored_query,
        finished_turns=admitted.finished,
        collections=[c for c in visible if not scope or c in scope],
        collection_scope=admitted.scope,
    )


async def _require_own_attachments(
    db: AsyncSession, principal: Principal, requested: list[uuid.UUID]
) -> None:
    """404 for the first requested attachment that is not the caller's (unknown and foreign
    alike). The graph checks again when it links them: this check keeps the turn unstored."""
    if not requested:
        return
    sessions = SessionStateRepository(db, principal.tenant_id)
    owned = await sessions.owned_attachments(principal.user_id, requested)
    missing = [a for a in requested if a not in owned]
    if missing:
        raise NotFound(f"No such attachment: {missing[0]}.", code="attachment_not_found")
