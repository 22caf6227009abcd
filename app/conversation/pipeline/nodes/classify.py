"""classify: how related the question is to the conversation, which queries retrieve searches
with (ADR 0034), the standalone rewrite of a question that depends on the conversation, and
the guess of the query's composition."""

from __future__ import annotations

import logging

from langgraph.runtime import Runtime

from app.conversation.pipeline.composition import classify_query
from app.conversation.pipeline.context import TurnContext
from app.conversation.pipeline.cpu import chars_of, run_sized
from app.conversation.pipeline.followups import keep_user_words, rewrite_by_rules, rewrite_prompt
from app.conversation.pipeline.query_plan import (
    cited_weight,
    depends_on_history,
    plan_queries,
    relatedness,
)
from app.conversation.pipeline.state import RetrievalPlan, TurnState, TurnUpdate, turn_ids
from app.conversation.turn.manifest import RetrievalSection
from app.conversation.turn.manifest_records import Classification, Rewrite

logger = logging.getLogger(__name__)

TOOLS_REWRITE = "rules; the model may search with its own query"


async def _model_rewrite(ctx: TurnContext, state: TurnState) -> str | None:
    """The model's standalone rewrite (the fast model when set), keeping every word of the
    question; None without a model or when it fails."""
    responder = ctx.rewriter or ctx.responder
    if not responder.uses_language_model:
        return None
    await ctx.end_reads()  # no connection is held while a model answers
    try:
        rewritten = await responder.complete(rewrite_prompt(state["query"], state["history"]))
    except Exception:  # the rules are the fallback, not a failed turn
        logger.warning("follow-up rewrite by the model failed", exc_info=True)
        return None
    if not rewritten or not rewritten.strip().strip('"'):
        return None
    return keep_user_words(rewritten.strip().strip('"'), state["query"])


async def classify(state: TurnState, runtime: Runtime[TurnContext]) -> TurnUpdate:
    """Weigh the conversation, plan the queries (rewriting a dependent question) and guess
    the query's composition."""
    ctx = runtime.context
    tenant = turn_ids(state).tenant
    async with ctx.reads(tenant) as db:
        has_kb = await ctx.kb_status.has_documents(db, tenant)
    query, history = state["query"], state["history"]
    size = chars_of(text for turn in history for text in (turn["user_query"], turn["answer"]))
    related = await run_sized(size, relatedness, query, history)
    follow_up = depends_on_history(related)
    reformulated, how, by = query, "unchanged", None
    model_rewrite = None
    if follow_up and state["triage"]["route"] == "tools":
        # No rewrite call: the planned queries carry the conversation into retrieval, and a
        # tool-calling model that finds the sources short searches with its own query.
        reformulated = await run_sized(size, rewrite_by_rules, query, history)
        how, by = TOOLS_REWRITE, "rules"
    elif follow_up:
        # A model call on the path to the first token is paid only by a question that leans
        # on something said before (a referring word, an ordinal, a correction). A question
        # that merely shares words with the last turn reads on its own: the history query
        # (no model) carries the conversation for it.
        if related.cue:
            model_rewrite = await _model_rewrite(ctx, state)
        if model_rewrite is not None:
            reformulated, how, by = model_rewrite, "llm", "llm"
        else:
            reformulated = await run_sized(size, rewrite_by_rules, query, history)
            how, by = "rules", "rules"
    queries = await run_sized(size, plan_queries, query, history, related, rewrite=model_rewrite)
    guess = classify_query(
        f"{query} {reformulated}" if follow_up else query,
        attachments=len(state["active_attachment_ids"]),
        knowledge_base=has_kb,
    )
    return TurnUpdate(
        is_follow_up=follow_up,
        reformulated_query=reformulated,
        retrieval_plan=RetrievalPlan(
            queries=queries, cited_weight=cited_weight(related) if history else 0.0
        ),
        query_composition=guess.composition,
        composition_confidence=guess.confidence,
        context_metadata=RetrievalSection(
            classification=Classification(reason=guess.reason, rewrite=how, knowledge_base=has_kb),
            rewrite=Rewrite(by=by, model=_rewrite_model(ctx) if by == "llm" else None),
            relatedness=related.as_dict(),
        ),
    )


def _rewrite_model(ctx: TurnContext) -> str:
    """The name of the model that wrote the rewrite."""
    return (ctx.rewriter or ctx.responder).model_name
