"""process_messages: normalise the request into the latest query and the client's history."""

from __future__ import annotations

from langgraph.runtime import Runtime

from app.conversation.pipeline.context import TurnContext
from app.conversation.pipeline.state import TurnState, TurnUpdate
from app.core.errors import UnprocessableEntity


async def process_messages(state: TurnState, runtime: Runtime[TurnContext]) -> TurnUpdate:
    """Split the request into the query and the client-sent history."""
    messages = state["request_messages"]
    if not messages or messages[-1]["role"] != "user" or not messages[-1]["content"].strip():
        raise UnprocessableEntity(
            "The conversation must end with a non-empty user message.", code="empty_conversation"
        )
    history = [m for m in messages[:-1] if m["role"] in ("user", "assistant")]
    return {"query": messages[-1]["content"].strip(), "client_history": history}
