"""The input guard over a whole client-sent conversation, and where that work runs.

Every message the client sent is checked, not only the newest: an earlier one that the policy
blocks is dropped from the request (with the assistant reply that follows it), so it never
reaches the prompt as client history. Each drop is a line in the triage log.

The checks are pure-Python CPU work (about 5 ms per 1,000 characters), so they never run on
the event loop. They read a bounded amount: the newest message whole (at most 32,000
characters), then earlier messages newest first until `MAX_HISTORY_CHECKED_CHARS`; the ones
before that are dropped unread. A message nobody checked never reaches the prompt, and the
budget is three times the largest context a turn builds, so nothing the model would have seen
is lost.

An ordinary turn's few thousand characters are checked on a thread of their own. Past
`IN_THREAD_MAX_CHARS` the work goes to a worker process: on a thread, a 930 KB conversation's
half second of checks kept the event loop waiting for the interpreter, `/healthz` p95 139 ms
(issue 33, ADR 0092)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from app.core.child_process import OneProcess
from app.guardrails.input_checks import InputVerdict, check_input
from app.guardrails.policy import TenantPolicy
from app.llm.shapes import ChatMessage

MAX_HISTORY_CHECKED_CHARS = 96_000
"""Characters of earlier client-sent messages the guard reads in one turn (newest first);
about 24,000 tokens, three times `THREADLINE_CONTEXT_MAX_TOKENS`' default."""
IN_THREAD_MAX_CHARS = 8_000
"""Up to this many characters to read, the checks (about 40 ms) run on the guard's thread;
past it, in the guard's process (a pickling hop of well under a millisecond)."""

# One thread: however many turns arrive at once, small checks compete with the event loop
# from one thread only.
_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="guard-input")
_PROCESS = OneProcess("input guard")


@dataclass(frozen=True)
class ConversationVerdict:
    """What the guard decided about a turn's messages."""

    earlier: list[ChatMessage]
    """The earlier messages that may reach the prompt."""
    dropped: list[str]
    """A triage log line per earlier message dropped (the position and the reason)."""
    newest: InputVerdict


@dataclass(frozen=True)
class _Checked:
    """What the checks send back: positions, not messages (a few hundred bytes over the
    worker's pipe, whatever the conversation's size)."""

    kept: list[int]
    dropped: list[str]
    newest: InputVerdict


async def check_conversation(
    messages: list[ChatMessage], policy: TenantPolicy, similar: bool
) -> ConversationVerdict:
    """Every check of a turn's messages, off the event loop. `similar`: the semantic check
    found the newest message close to a known attack."""
    first_read = first_within_budget(messages[:-1])
    read = sum(len(message["content"]) for message in messages[first_read:])
    if read > IN_THREAD_MAX_CHARS:
        checked = await _PROCESS.call(_check_all, messages, policy, similar)
    else:
        loop = asyncio.get_running_loop()
        checked = await loop.run_in_executor(_THREAD, _check_all, messages, policy, similar)
    earlier = [messages[index] for index in checked.kept]
    return ConversationVerdict(earlier, checked.dropped, checked.newest)


def process_started() -> bool:
    """Whether the guard's worker process is up (it starts with the first large input)."""
    return _PROCESS.started


def shutdown() -> None:
    """Stop the guard's worker process, if one started (the API process is stopping)."""
    _PROCESS.shutdown()


def _check_all(messages: list[ChatMessage], policy: TenantPolicy, similar: bool) -> _Checked:
    kept, dropped = _without_blocked_history(messages[:-1], policy)
    newest = messages[-1]["content"] if messages else ""
    return _Checked(kept, dropped, check_input(newest, policy, similar_embedding=similar))


def _without_blocked_history(
    messages: list[ChatMessage], policy: TenantPolicy
) -> tuple[list[int], list[str]]:
    """The positions of the earlier messages the policy lets through, within the guard's
    reading budget; a log line per drop (the position and the reason, never the text)."""
    first_read = first_within_budget(messages)
    log: list[str] = []
    if first_read:
        log.append(f"guard_input: DROPPED messages 0-{first_read - 1} (unread: over the limit)")
    kept: list[int] = []
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
        kept.append(index)
    return kept, log


def first_within_budget(messages: list[ChatMessage]) -> int:
    """The index of the oldest earlier message the guard reads: newest first, while the
    characters read stay within `MAX_HISTORY_CHECKED_CHARS`."""
    read = 0
    for index in range(len(messages) - 1, -1, -1):
        read += len(messages[index]["content"])
        if read > MAX_HISTORY_CHECKED_CHARS:
            return index + 1
    return 0
