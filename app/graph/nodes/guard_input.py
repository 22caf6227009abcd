"""guard_input: the input guardrail. Injection/jailbreak patterns, abuse and personal data,
each blocked, flagged or ignored as the tenant's policy says. A blocked message is answered
politely by answer_early, without retrieval or the model; the turn is still stored.

Every message the client sent is checked, not only the newest: an earlier one that the policy
blocks is dropped from the request (with the assistant reply that follows it), so it never
reaches the prompt as client history. Each drop is a line in the triage log.

The newest message is also compared with the known attack phrasings under the platform's
embedder (one embedding call; the phrasings' vectors are made once per process); earlier
messages get the pattern and lexical checks only, so a long client history costs no model
time."""

from __future__ import annotations

import logging
from typing import Any

from langgraph.runtime import Runtime

from app.graph.context import TurnContext
from app.graph.policy import tenant_policy
from app.graph.state import TurnState, turn_ids
from app.guardrails.injection import SemanticCheck
from app.guardrails.input_checks import BLOCKED_ANSWERS, check_input
from app.guardrails.policy import TenantPolicy
from app.turns.types import ChatMessage

logger = logging.getLogger(__name__)


def _without_blocked_history(
    messages: list[ChatMessage], policy: TenantPolicy
) -> tuple[list[ChatMessage], list[str]]:
    """The earlier messages minus those the policy blocks; a log line per drop (the position
    and the check, never the text)."""
    kept: list[ChatMessage] = []
    log: list[str] = []
    dropping_reply = False
    for index, message in enumerate(messages):
        if message["role"] == "assistant" and dropping_reply:
            log.append(f"guard_input: DROPPED message {index} (reply to a dropped message)")
            continue
        verdict = check_input(message["content"], policy)
        dropping_reply = verdict.blocked_by is not None and message["role"] == "user"
        if verdict.blocked_by is not None:
            log.append(f"guard_input: DROPPED message {index} ({verdict.blocked_by})")
            continue
        kept.append(message)
    return kept, log


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


async def guard_input(state: TurnState, runtime: Runtime[TurnContext]) -> dict[str, Any]:
    """Check the messages against the tenant's input policy."""
    policy = await tenant_policy(runtime.context, turn_ids(state).tenant)
    messages = state["request_messages"]
    earlier, dropped = _without_blocked_history(messages[:-1], policy)
    newest = messages[-1]["content"] if messages else ""
    similar = (
        policy.injection != "off"
        and bool(newest)
        and await _close_to_attack(runtime.context, newest)
    )
    verdict = check_input(newest, policy, similar_embedding=similar)
    triage = {**state["triage"], "log": [*state["triage"]["log"], *dropped, *verdict.log]}
    if verdict.flags:
        triage["flags"] = verdict.flags
    if verdict.blocked_by is not None:
        triage.update(
            route="blocked",
            skip_llm=True,
            answer=BLOCKED_ANSWERS[verdict.blocked_by],
            blocked_by=verdict.blocked_by,
        )
    update: dict[str, Any] = {"triage": triage}
    if dropped:
        update["request_messages"] = [*earlier, messages[-1]]
    return update
