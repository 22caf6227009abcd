"""classify: detect follow-ups and rewrite them standalone; guess the query composition."""

from __future__ import annotations

import logging
from typing import Any

from langgraph.runtime import Runtime

from app.graph.composition import classify_query
from app.graph.context import TurnContext
from app.graph.followups import is_follow_up, rewrite_by_rules, rewrite_prompt
from app.graph.state import TurnState, turn_ids

logger = logging.getLogger(__name__)


async def _rewrite(ctx: TurnContext, state: TurnState) -> tuple[str, str]:
    """The standalone query and how it was written ("llm" or "rules")."""
    if ctx.responder.uses_language_model:
        try:
            rewritten = await ctx.responder.complete(
                rewrite_prompt(state["query"], state["history"])
            )
            if rewritten:
                return rewritten.strip().strip('"'), "llm"
        except Exception:  # the rules are the fallback, not a failed turn
            logger.warning("follow-up rewrite by the model failed", exc_info=True)
    return rewrite_by_rules(state["query"], state["history"]), "rules"


async def classify(state: TurnState, runtime: Runtime[TurnContext]) -> dict[str, Any]:
    """Detect a follow-up (rewrite it standalone) and guess the query's composition."""
    ctx = runtime.context
    tenant = turn_ids(state).tenant
    async with ctx.transaction(tenant) as db:
        has_kb = await ctx.kb_status.has_documents(db, tenant)
    follow_up = is_follow_up(state["query"], state["history"])
    reformulated, how = state["query"], "unchanged"
    if follow_up and state["triage"]["route"] == "tools":
        how = "by the model's tool calls"  # it writes its own standalone search queries
    elif follow_up:
        reformulated, how = await _rewrite(ctx, state)
    guess = classify_query(
        f"{state['query']} {reformulated}" if follow_up else state["query"],
        attachments=len(state["active_attachment_ids"]),
        knowledge_base=has_kb,
    )
    return {
        "is_follow_up": follow_up,
        "reformulated_query": reformulated,
        "query_composition": guess.composition,
        "composition_confidence": guess.confidence,
        "context_metadata": {
            "classification": {"reason": guess.reason, "rewrite": how, "knowledge_base": has_kb},
        },
    }
