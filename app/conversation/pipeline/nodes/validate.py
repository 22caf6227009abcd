"""validate: the principal and session are present and the messages within limits.

The turn's row was already recorded `pending` when the API admitted it
(app/conversation/service/admission.py),
in the same statement that checked the session is the caller's; this node guards the graph
itself against a state no request could have produced.
"""

from __future__ import annotations

from langgraph.runtime import Runtime

from app.conversation.pipeline.context import TurnContext
from app.conversation.pipeline.state import TurnState, TurnUpdate
from app.core.errors import UnprocessableEntity


async def validate(state: TurnState, runtime: Runtime[TurnContext]) -> TurnUpdate:
    """Refuse a request the pipeline cannot run."""
    ctx = runtime.context
    if not all((state["tenant_id"], state["user_id"], state["session_id"], state["turn_id"])):
        raise UnprocessableEntity("A turn needs a principal and a session.", code="invalid_turn")
    messages = state["request_messages"]
    if not messages or len(messages) > ctx.settings.max_messages:
        raise UnprocessableEntity("The conversation is empty or too long.", code="invalid_turn")
    if any(len(m["content"]) > ctx.settings.max_message_chars for m in messages):
        raise UnprocessableEntity("A message is too long.", code="message_too_long")
    return {"status": "pending"}
