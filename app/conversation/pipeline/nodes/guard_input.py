"""guard_input: the input guardrail. Injection/jailbreak patterns, abuse and personal data,
each blocked, flagged or ignored as the tenant's policy says. A blocked message is answered
politely by answer_early, without retrieval or the model; the turn is still stored.

The newest message is also compared with the known attack phrasings under the platform's
embedder (one embedding call; the phrasings' vectors are made once per process); earlier
messages get the pattern and lexical checks only, so a long client history costs no model
time. The checks themselves, and the bound on what they read, are
`app.guardrails.conversation_checks`'s."""

from __future__ import annotations

import logging

from langgraph.runtime import Runtime

from app.conversation.pipeline.context import TurnContext
from app.conversation.pipeline.policy import tenant_policy
from app.conversation.pipeline.state import TurnState, TurnUpdate, turn_ids
from app.guardrails.conversation_checks import check_conversation
from app.guardrails.injection import SemanticCheck
from app.guardrails.input_checks import BLOCKED_ANSWERS

logger = logging.getLogger(__name__)


async def _close_to_attack(ctx: TurnContext, message: str) -> bool:
    """The embedding check; an embedder that fails (a remote one) leaves the turn to the
    pattern and lexical checks rather than failing it."""
    check = SemanticCheck(ctx.embedder, ctx.settings.guard_injection_embedding_similarity)
    if not check.enabled:
        return False
    try:
        return (await check.hits([message]))[0]
    except Exception:
        logger.warning("guard_input: embedding check failed; patterns only", exc_info=True)
        return False


async def guard_input(state: TurnState, runtime: Runtime[TurnContext]) -> TurnUpdate:
    """Check the messages against the tenant's input policy."""
    policy = await tenant_policy(runtime.context, turn_ids(state).tenant)
    messages = state["request_messages"]
    newest = messages[-1]["content"] if messages else ""
    similar = (
        policy.injection != "off"
        and bool(newest)
        and await _close_to_attack(runtime.context, newest)
    )
    checked = await check_conversation(messages, policy, similar)
    earlier, dropped, verdict = checked.earlier, checked.dropped, checked.newest
    triage = state["triage"].copy()
    triage["log"] = [*state["triage"]["log"], *dropped, *verdict.log]
    if verdict.flags:
        triage["flags"] = verdict.flags
    if verdict.blocked_by is not None:
        triage.update(
            {
                "route": "blocked",
                "skip_llm": True,
                "answer": BLOCKED_ANSWERS[verdict.blocked_by],
                "blocked_by": verdict.blocked_by,
            }
        )
    update = TurnUpdate(triage=triage)
    if len(earlier) < len(messages) - 1:
        update["request_messages"] = [*earlier, messages[-1]]
    return update
