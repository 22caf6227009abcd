"""guard_input: the input guardrail. Injection/jailbreak patterns, abuse and personal data,
each blocked, flagged or ignored as the tenant's policy says. A blocked message is answered
politely by answer_early, without retrieval or the model; the turn is still stored."""

from __future__ import annotations

import uuid
from typing import Any

from langgraph.runtime import Runtime

from app.graph.context import TurnContext
from app.graph.state import TurnState
from app.guardrails.input_checks import BLOCKED_ANSWERS, check_input
from app.guardrails.policy import TenantPolicy


async def tenant_policy(ctx: TurnContext, tenant_id: str) -> TenantPolicy:
    """The tenant's policy; a transaction only when the process cache has none (or it aged)."""
    tenant = uuid.UUID(tenant_id)
    policy = ctx.policies.cached(tenant)
    if policy is None:
        async with ctx.transaction(tenant) as db:
            policy = await ctx.policies.get(db, tenant)
    return policy


async def guard_input(state: TurnState, runtime: Runtime[TurnContext]) -> dict[str, Any]:
    policy = await tenant_policy(runtime.context, state["tenant_id"])
    messages = state["request_messages"]
    verdict = check_input(messages[-1]["content"] if messages else "", policy)
    triage = {**state["triage"], "log": [*state["triage"]["log"], *verdict.log]}
    if verdict.flags:
        triage["flags"] = verdict.flags
    if verdict.blocked_by is not None:
        triage.update(
            route="blocked",
            skip_llm=True,
            answer=BLOCKED_ANSWERS[verdict.blocked_by],
            blocked_by=verdict.blocked_by,
        )
    return {"triage": triage}
