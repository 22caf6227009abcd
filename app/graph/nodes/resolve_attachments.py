"""resolve_attachments: the request's attachments join the session (ownership checked), and
every attachment active in the session is carried into the turn."""

from __future__ import annotations

import uuid
from typing import Any

from langgraph.runtime import Runtime
from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert

from app.chat.repository import SessionStateRepository
from app.core.errors import NotFound
from app.graph.context import TurnContext
from app.graph.state import TurnState
from app.models import Attachment, SessionAttachment


async def resolve_attachments(state: TurnState, runtime: Runtime[TurnContext]) -> dict[str, Any]:
    ctx = runtime.context
    tenant, session = uuid.UUID(state["tenant_id"]), uuid.UUID(state["session_id"])
    user = uuid.UUID(state["user_id"])
    requested = [uuid.UUID(a) for a in state["request_attachment_ids"]]
    async with ctx.transaction(tenant) as db:
        if requested:
            owned = set(
                (
                    await db.execute(
                        select(Attachment.id).where(
                            Attachment.tenant_id == tenant,
                            Attachment.user_id == user,
                            Attachment.id.in_(requested),
                        )
                    )
                ).scalars()
            )
            missing = [str(a) for a in requested if a not in owned]
            if missing:
                raise NotFound(f"No such attachment: {missing[0]}.", code="attachment_not_found")
            await db.execute(
                pg_insert(SessionAttachment)
                .values(
                    [
                        {"tenant_id": tenant, "session_id": session, "attachment_id": a}
                        for a in requested
                    ]
                )
                .on_conflict_do_nothing()
            )
        active = await SessionStateRepository(db, tenant).active_attachment_ids(session)
    return {"active_attachment_ids": [str(a) for a in active]}
