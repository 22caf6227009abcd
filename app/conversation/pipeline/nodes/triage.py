"""triage: steps that may answer without the model, each passing through once an earlier one
(or the input guardrail) decided:

1. relevance — a tenant that restricts topics gets off-topic questions declined;
2. FAQ — a question close enough (cosine, tunable threshold) to a tenant's FAQ entry is
   answered from it (only tenants that have FAQs pay for the embedding and the query);
3. intent — greetings, thanks and goodbyes get a brief answer without retrieval.

The triage record: `route` (`blocked`, `off_topic`, `faq`, `smalltalk`, or `llm`/`tools` when
the model answers), `skip_llm`, `log` (one line per step) and the early `answer`.
"""

from __future__ import annotations

from langgraph.runtime import Runtime

from app.conversation.pipeline.context import TurnContext
from app.conversation.pipeline.followups import is_follow_up
from app.conversation.pipeline.policy import tenant_policy
from app.conversation.pipeline.state import FaqHit, Triage, TurnState, TurnUpdate, turn_ids
from app.conversation.pipeline.tools import tool_model
from app.conversation.turn.types import HistoryTurn
from app.faqs.service import closest_faq
from app.guardrails.input_checks import BLOCKED_ANSWERS
from app.guardrails.policy import TenantPolicy
from app.guardrails.triage_rules import (
    SMALLTALK_ANSWERS,
    off_topic_answer,
    on_topic,
    smalltalk_intent,
)


def _relevance(state: TurnState, policy: TenantPolicy, triage: Triage) -> str:
    query = state["query"]
    if not policy.topics:
        return "triage_relevance: PASS (no topic restriction)"
    if smalltalk_intent(query) or is_follow_up(query, state["history"]):
        return "triage_relevance: PASS (small talk or follow-up)"
    if on_topic(query, policy.topics):
        return "triage_relevance: PASS"
    triage.update(
        {"route": "off_topic", "skip_llm": True, "answer": off_topic_answer(policy.topics)}
    )
    return "triage_relevance: OFF TOPIC"


async def _faq(ctx: TurnContext, state: TurnState, policy: TenantPolicy, triage: Triage) -> str:
    if not policy.faq_count:
        return "triage_faq: NO FAQS"
    tenant = turn_ids(state).tenant
    [vector] = await ctx.embedder.embed([state["query"]])
    async with ctx.reads(tenant) as db:
        match = await closest_faq(db, tenant, vector)
    if match is None:
        return "triage_faq: NO FAQS"
    if match.similarity < policy.faq_threshold:
        return f"triage_faq: NO MATCH (best {match.similarity:.2f} < {policy.faq_threshold:.2f})"
    triage.update(
        {
            "route": "faq",
            "skip_llm": True,
            "answer": match.answer,
            "faq": FaqHit(id=match.id, question=match.question, similarity=match.similarity),
        }
    )
    return f"triage_faq: MATCH {match.id} ({match.similarity:.2f})"


def _intent(state: TurnState, policy: TenantPolicy, triage: Triage, route: str) -> str:
    intent = smalltalk_intent(state["query"]) if policy.smalltalk else None
    if intent is None:
        triage["route"] = route
        return f"triage_intent: ROUTE -> {route}"
    triage.update(
        {
            "route": "smalltalk",
            "skip_llm": True,
            "answer": SMALLTALK_ANSWERS[intent],
            "intent": intent,
        }
    )
    return f"triage_intent: {intent.upper()}"


async def triage(state: TurnState, runtime: Runtime[TurnContext]) -> TurnUpdate:
    """Run the triage steps that may answer without the model."""
    ctx = runtime.context
    policy = await tenant_policy(ctx, turn_ids(state).tenant)
    decided = state["triage"].copy()
    log = list(decided["log"])
    for step in ("triage_relevance", "triage_faq", "triage_intent"):
        if decided["skip_llm"]:
            log.append(f"{step}: SKIPPED (route {decided['route']})")
        elif step == "triage_relevance":
            log.append(_relevance(state, policy, decided))
        elif step == "triage_faq":
            log.append(await _faq(ctx, state, policy, decided))
        else:
            route = "tools" if uses_tools(ctx) else "llm"
            log.append(_intent(state, policy, decided, route))
    decided["log"] = log
    return TurnUpdate(triage=decided, history=redact_blocked(state["history"]))


BLOCKED_REPLIES = frozenset(BLOCKED_ANSWERS.values())


WITHHELD_QUERY = "[message withheld by the input guardrail]"


def redact_blocked(turns: list[HistoryTurn]) -> list[HistoryTurn]:
    """The turns, with those the input guardrail blocked (recognised by the fixed reply they
    got) reduced to a placeholder question: the model must not meet a blocked injection again
    as history, or in a summary. The turns stay in the lists, so a count of them is still a
    position in the session's order (the summary counter, `summarized_turns`, is one)."""
    return [_redacted(t) if t["answer"] in BLOCKED_REPLIES else t for t in turns]


def _redacted(turn: HistoryTurn) -> HistoryTurn:
    return HistoryTurn(
        turn_id=turn["turn_id"],
        user_query=WITHHELD_QUERY,
        answer=turn["answer"],
        status=turn["status"],
    )


def uses_tools(ctx: TurnContext) -> bool:
    """Whether this turn's model gets tools (tool calling) besides the retrieved sources."""
    return ctx.settings.agent_tools and tool_model(ctx.responder) is not None
