"""validate: the principal and session are present, the message within limits; the user's
turn is recorded (PII-anonymised) before anything is generated."""

from __future__ import annotations

import uuid
from typing import Any

from langgraph.runtime import Runtime

from app.core.errors import UnprocessableEntity
from app.graph.context import TurnContext
from app.graph.state import TurnState
from app.models import QueryHistory
from app.privacy.pii import anonymize


async def validate(state: TurnState, runtime: Runtime[TurnContext]) -> dict[str, Any]:
    ctx = runtime.context
    if not all((state["tenant_id"], state["user_id"], state["session_id"], state["turn_id"])):
        raise UnprocessableEntity("A turn needs a principal and a session.", code="invalid_turn")
    messages = state["request_messages"]
    if not messages or len(messages) > ctx.settings.max_messages:
        raise UnprocessableEntity("The conversation is empty or too long.", code="invalid_turn")
    if any(len(m["content"]) > ctx.settings.max_message_chars for m in messages):
        raise UnprocessableEntity("A message is too long.", code="message_too_long")

    query = messages[-1]["content"]
    stored = anonymize(query).text if ctx.settings.pii_anonymize else query
    # Recorded before streaming starts: a disconnect or a failure later leaves this turn
    # marked incomplete or failed, never a silent gap.
    async with ctx.transaction(state["tenant_id"]) as db:
        db.add(
            QueryHistory(
                tenant_id=uuid.UUID(state["tenant_id"]),
                id=uuid.UUID(state["turn_id"]),
                session_id=uuid.UUID(state["session_id"]),
                user_id=uuid.UUID(state["user_id"]),
                user_query=stored,
                status="pending",
                attachment_ids=[uuid.UUID(a) for a in state["request_attachment_ids"]],
            )
        )
    return {"status": "pending"}
