"""resolve_attachments: the request's attachments join the session (ownership checked), and
every attachment active in the session is carried into the turn. A turn without attachments
(the common case) touches no table here: the session's set was read when the turn was
admitted."""

from __future__ import annotations

import asyncio
import time
import uuid

from langgraph.runtime import Runtime
from sqlalchemy.ext.asyncio import AsyncSession

from app.conversation.pipeline.context import TurnContext
from app.conversation.pipeline.state import TurnState, TurnUpdate, turn_ids
from app.conversation.repository import SessionStateRepository
from app.conversation.turn.manifest import RetrievalSection
from app.conversation.turn.manifest_records import UnavailableAttachment
from app.core.errors import AppError, NotFound, UnprocessableEntity


async def resolve_attachments(state: TurnState, runtime: Runtime[TurnContext]) -> TurnUpdate:
    """Link the requested attachments and wait for the active ones to be ready."""
    ctx = runtime.context
    ids = turn_ids(state)
    tenant, session, user = ids.tenant, ids.session, ids.user
    requested = state["request_attachment_ids"]
    active = state["session_attachment_ids"]
    if requested:
        async with ctx.transaction(tenant) as db:
            await _attach(db, tenant, user, session, requested)
            active = await SessionStateRepository(db, tenant).active_attachment_ids(session)
    usable, unavailable = await _await_processing(ctx, tenant, active, set(requested))
    return TurnUpdate(
        active_attachment_ids=usable,
        context_metadata=RetrievalSection(attachments_unavailable=unavailable),
    )


async def _attach(
    db: AsyncSession,
    tenant: uuid.UUID,
    user: uuid.UUID,
    session: uuid.UUID,
    requested: list[uuid.UUID],
) -> None:
    """Link the requested attachments to the session: each must be the user's (else 404)."""
    repository = SessionStateRepository(db, tenant)
    owned = await repository.owned_attachments(user, requested)
    missing = [str(a) for a in requested if a not in owned]
    if missing:
        raise NotFound(f"No such attachment: {missing[0]}.", code="attachment_not_found")
    await repository.link_attachments(session, requested)


POLL_SECONDS = 0.25


async def _await_processing(
    ctx: TurnContext, tenant: uuid.UUID, active: list[uuid.UUID], requested: set[uuid.UUID]
) -> tuple[list[uuid.UUID], list[UnavailableAttachment]]:
    """Wait (up to the configured time) until every active attachment is processed. One the
    user just attached that failed is an error; an older one that failed is left out."""
    if not active:
        return [], []
    deadline = time.monotonic() + ctx.settings.attachment_wait_seconds
    while True:
        async with ctx.transaction(tenant) as db:
            rows = await SessionStateRepository(db, tenant).attachment_statuses(active)
        waiting = [r for r in rows if r.status in ("pending", "processing")]
        if not waiting:
            break
        if time.monotonic() >= deadline:
            raise AttachmentNotReady(
                f"The attachment {waiting[0].id} is still being processed after "
                f"{ctx.settings.attachment_wait_seconds:g} s; try again shortly.",
                code="attachment_not_ready",
            )
        await asyncio.sleep(POLL_SECONDS)
    failed = [r for r in rows if r.status == "failed"]
    for row in failed:
        if row.id in requested:
            raise UnprocessableEntity(
                f"The attachment {row.id} could not be processed: {row.error}",
                code="attachment_failed",
            )
    ready = {r.id for r in rows if r.status == "ready"}
    return [a for a in active if a in ready], [
        UnavailableAttachment(id=str(r.id), status=r.status) for r in failed
    ]


class AttachmentNotReady(AppError):
    """An attachment still processing when the turn could not wait longer."""

    status_code, code, message = 409, "attachment_not_ready", "The attachment is not ready."
