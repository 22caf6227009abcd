"""build_context: the prompt within the token budget, the numbered sources, the context
manifest (context_metadata), and the session summary brought up to date."""

from __future__ import annotations

import logging
from typing import Any

from langgraph.runtime import Runtime

from app.graph.budget import BudgetSettings
from app.graph.budget import build_context as fit_context
from app.graph.context import TurnContext
from app.graph.state import TurnState
from app.graph.summary import fold_by_rules, summary_prompt
from app.llm.tokens import count_tokens
from app.turns.types import HistoryTurn

logger = logging.getLogger(__name__)


async def _fold(ctx: TurnContext, previous: str, turns: list[HistoryTurn]) -> tuple[str, str]:
    """The summary with `turns` folded in, and how it was written."""
    cap = ctx.settings.summary_max_tokens
    if ctx.responder.uses_language_model:
        try:
            text = await ctx.responder.complete(summary_prompt(previous, turns, cap))
            if text and count_tokens(text) <= cap:
                return text, "llm"
        except Exception:
            logger.warning("summary by the model failed; using rules", exc_info=True)
    return fold_by_rules(previous, turns, cap), "rules"


async def build_context(state: TurnState, runtime: Runtime[TurnContext]) -> dict[str, Any]:
    """Fit history, summary and passages into the prompt's token budget."""
    ctx = runtime.context
    settings = BudgetSettings(
        base=ctx.settings.context_base_tokens,
        per_result=ctx.settings.context_tokens_per_result,
        cap=ctx.settings.context_max_tokens,
    )
    summary = state["summary"]
    summarized = state["summarized_turns"]
    fold_note: dict[str, Any] = {}
    if state["unsummarized"]:  # older turns that fell out of the window unsummarised
        summary, how = await _fold(ctx, summary, state["unsummarized"])
        summarized += len(state["unsummarized"])
        fold_note = {"folded_turns": len(state["unsummarized"]), "method": how}

    # Fit; fold whatever history does not fit into the summary; refit with the longer summary
    # (which may push out another turn) until nothing is left over. History only shrinks, so
    # this ends; nothing is silently dropped.
    history = list(state["history"])
    cut_notes: list[dict[str, Any]] = []
    while True:
        built = fit_context(
            query=state["query"],
            composition=state["query_composition"],
            passages=state["passages"],
            history=history,
            summary=summary,
            settings=settings,
        )
        overflow = [t for t in built.overflow if t["status"] != "client"]
        if not overflow:
            break
        cut_notes += [t for t in built.metadata["truncated"] if t.get("kind") == "history"]
        summary, how = await _fold(ctx, summary, overflow)
        summarized += len(overflow)
        fold_note = {
            "folded_turns": fold_note.get("folded_turns", 0) + len(overflow),
            "method": how,
        }
        history = built.history_included
    if cut_notes:
        built.metadata["truncated"] += cut_notes
        built.metadata["truncation_applied"] = True

    metadata = {
        **built.metadata,
        "query_composition": state["query_composition"],
        "composition_confidence": state["composition_confidence"],
        "reformulated_query": state["reformulated_query"] if state["is_follow_up"] else None,
        "is_follow_up": state["is_follow_up"],
        "active_attachment_ids": state["active_attachment_ids"],
        "history_source": state["history_source"],
        "summary": {
            "included": built.metadata["summary_included"],
            "summarized_turns": summarized,
            **fold_note,
        },
    }
    changed = summary != state["summary"] or summarized != state["summarized_turns"]
    return {
        "prompt": built.prompt,
        "sources": built.sources,
        "context_metadata": metadata,
        "new_summary": summary if changed else None,
        "new_summarized_turns": summarized,
    }
