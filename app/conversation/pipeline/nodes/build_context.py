"""build_context: the prompt within the token budget, the numbered sources and the context
manifest (context_metadata).

The running summary is read as the turn found it: it is brought up to date after the turn is
stored, in the background (app/conversation/pipeline/summary_job.py, ADR 0035), so no model call
waits here.
Turns the summary does not cover yet that do not fit the budget are left out of this prompt
and recorded as truncated; the next fold covers them."""

from __future__ import annotations

from langgraph.runtime import Runtime

from app.conversation.pipeline.budget import AWAITING_SUMMARY, BudgetSettings
from app.conversation.pipeline.budget import build_context as fit_context
from app.conversation.pipeline.context import TurnContext
from app.conversation.pipeline.state import TurnState, TurnUpdate
from app.conversation.pipeline.tools import instruction_tokens
from app.conversation.turn.manifest import Manifest
from app.conversation.turn.manifest_records import SummaryRecord, Truncation


async def build_context(state: TurnState, runtime: Runtime[TurnContext]) -> TurnUpdate:
    """Fit summary, history and passages into the prompt's token budget."""
    ctx = runtime.context
    settings = BudgetSettings(
        base=ctx.settings.context_base_tokens,
        per_result=ctx.settings.context_tokens_per_result,
        cap=ctx.settings.context_max_tokens,
    )
    built = fit_context(
        query=state["query"],
        composition=state["query_composition"],
        passages=state["passages"],
        history=state["history"],
        summary=state["summary"],
        settings=settings,
        # A tool-calling model's first call adds its instructions to this prompt (agent).
        reserved=instruction_tokens() if state["triage"]["route"] == "tools" else 0,
    )
    manifest = built.manifest
    if state["awaiting_summary"]:  # uncovered turns older than the cache: not in this prompt
        awaiting = Truncation(
            kind="history", turns=state["awaiting_summary"], reason=AWAITING_SUMMARY
        )
        manifest.truncated = [*(manifest.truncated or []), awaiting]
        manifest.truncation_applied = True
    manifest = manifest.merged(
        Manifest(
            query_composition=state["query_composition"],
            composition_confidence=state["composition_confidence"],
            reformulated_query=state["reformulated_query"] if state["is_follow_up"] else None,
            is_follow_up=state["is_follow_up"],
            active_attachment_ids=state["active_attachment_ids"],
            history_source=state["history_source"],
            summary=SummaryRecord(
                included=manifest.summary_included, summarized_turns=state["summarized_turns"]
            ),
        )
    )
    return TurnUpdate(prompt=built.prompt, sources=built.sources, context_metadata=manifest)
