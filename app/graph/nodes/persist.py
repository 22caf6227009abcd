"""persist: one transaction completes the turn's row and the session's summary; then the
history cache is refreshed."""

from __future__ import annotations

import time
import uuid
from typing import Any

from langgraph.runtime import Runtime

from app.chat.repository import SessionStateRepository, TurnRepository
from app.graph.context import TurnContext
from app.graph.state import TurnState
from app.privacy.pii import anonymize


async def persist(state: TurnState, runtime: Runtime[TurnContext]) -> dict[str, Any]:
    ctx = runtime.context
    tenant, session = uuid.UUID(state["tenant_id"]), uuid.UUID(state["session_id"])
    answer = anonymize(state["answer"]).text if ctx.settings.pii_anonymize else state["answer"]
    latency_ms = int((time.time() - state["started_at"]) * 1000)
    metadata = {**state["context_metadata"], "latency_ms": latency_ms}
    async with ctx.transaction(tenant) as db:
        await TurnRepository(db, tenant).finish(
            uuid.UUID(state["turn_id"]),
            status="complete",
            answer=answer,
            query_composition=state["query_composition"],
            context_metadata=metadata,
            model=state["model"],
            prompt_tokens=state["usage"]["prompt_tokens"],
            completion_tokens=state["usage"]["completion_tokens"],
            latency_ms=latency_ms,
        )
        summary = (state["summary"], state["summarized_turns"])
        changed = state["new_summary"] is not None
        if state["new_summary"] is not None:
            summary = (state["new_summary"], state["new_summarized_turns"])
        await SessionStateRepository(db, tenant).touch(session, summary if changed else None)
        snapshot = await ctx.history.snapshot(db, tenant, session, summary)
    await ctx.history.store(tenant, session, snapshot)  # after the commit
    # The turn is stored: the working fields are emptied so the thread's checkpoint keeps only
    # the small outcome (its record is query_history), which keeps checkpoints small and the
    # next turn's checkpoint load cheap.
    return {
        "status": "complete",
        "context_metadata": {"latency_ms": latency_ms},
        **CLEARED_AFTER_PERSIST,
    }


CLEARED_AFTER_PERSIST: dict[str, Any] = {
    "request_messages": [],
    "client_history": [],
    "history": [],
    "unsummarized": [],
    "passages": [],
    "prompt": [],
    "sources": [],
    "summary": "",
    "new_summary": None,
}
