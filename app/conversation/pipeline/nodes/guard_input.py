"""guard_input: the input guardrail. Injection/jailbreak patterns, abuse and personal data,
each blocked, flagged or ignored as the tenant's policy says. A blocked message is answered
politely by answer_early, without retrieval or the model; the turn is still stored.

Every message the client sent is checked, not only the newest: an earlier one that the policy
blocks is dropped from the request (with the assistant reply that follows it), so it never
reaches the prompt as client history. Each drop is a line in the triage log.

The newest message is also compared with the known attack phrasings under the platform's
embedder (one embedding call; the phrasings' vectors are made once per process); earlier
messages get the pattern and lexical checks only, so a long client history costs no model
time.

The checks are CPU work in pure Python, so they run on one thread of their own, never on the
event loop: a member's 930 KB conversation once held every other request for 21 s (issue
33). They read a bounded amount: the newest message whole (at most 32,000 characters), then
earlier messages newest first until `MAX_HISTORY_CHECKED_CHARS`; the ones before that are
dropped unread. A message nobody checked never reaches the prompt, and the budget is three
times the largest context a turn builds, so nothing the model would have seen is lost."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor

from langgraph.runtime import Runtime

from app.conversation.pipeline.context import TurnContext
from app.conversation.pipeline.policy import tenant_policy
from app.conversation.pipeline.state import TurnState, TurnUpdate, turn_ids
from app.conversation.turn.types import ChatMessage
from app.guardrails.injection import SemanticCheck
from app.guardrails.input_checks import BLOCKED_ANSWERS, InputVerdict, check_input
from app.guardrails.policy import TenantPolicy

logger = logging.getLogger(__name__)

MAX_HISTORY_CHECKED_CHARS = 96_000
"""Characters of earlier client-sent messages the guard reads in one turn (newest first);
about 24,000 tokens, three times `THREADLINE_CONTEXT_MAX_TOKENS`' default."""
# One thread: however many turns arrive at once, the guard's CPU work competes with the
# event loop from one thread only, so the loop keeps getting the interpreter every switch.
_GUARD_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="guard-input")


def _without_blocked_history(
    messages: list[ChatMessage], policy: TenantPolicy
) -> tuple[list[ChatMessage], list[str]]:
    """The earlier messages minus those the policy blocks and those past the guard's reading
    budget; a log line per drop (the position and the reason, never the text)."""
    first_read = _first_within_budget(messages)
    log: list[str] = []
    if first_read:
        log.append(f"guard_input: DROPPED messages 0-{first_read - 1} (unread: over the limit)")
    kept: list[ChatMessage] = []
    dropping_reply = False
    for index, message in enumerate(messages[first_read:], start=first_read):
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


def _first_within_budget(messages: list[ChatMessage]) -> int:
    """The index of the oldest message the guard reads: newest first, while the
    characters read stay within `MAX_HISTORY_CHECKED_CHARS`."""
    read = 0
    for index in range(len(messages) - 1, -1, -1):
        read += len(messages[index]["content"])
        if read > MAX_HISTORY_CHECKED_CHARS:
            return index + 1
    return 0


def _check_all(
    messages: list[ChatMessage], policy: TenantPolicy, similar: bool
) -> tuple[list[ChatMessage], list[str], InputVerdict]:
    """Every check of the turn's messages (the guard thread's whole job)."""
    earlier, dropped = _without_blocked_history(messages[:-1], policy)
    newest = messages[-1]["content"] if messages else ""
    return earlier, dropped, check_input(newest, policy, similar_embedding=similar)


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
    loop = asyncio.get_running_loop()
    earlier, dropped, verdict = await loop.run_in_executor(
        _GUARD_THREAD, _check_all, messages, policy, similar
    )
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
