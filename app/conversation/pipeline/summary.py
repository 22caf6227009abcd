"""The session's running summary: older turns folded in, a batch at a time, within a token cap.

The fold itself runs in the background (app/conversation/pipeline/summary_job.py); this module
holds what a
turn and the job share: when a fold is due, the job's name, and the two ways to fold."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence

from app.conversation.turn.types import ChatMessage, HistoryTurn
from app.core.jobs import Job
from app.llm.tokens import count_tokens

OMITTED = "(earlier turns omitted)"
SUMMARIZE = "threadline.summarize"


def summary_job(tenant_id: uuid.UUID, session_id: uuid.UUID) -> Job:
    """The job that brings one session's summary up to date."""
    return Job(SUMMARIZE, {"tenant_id": str(tenant_id), "session_id": str(session_id)})


def fold_due(finished: int, summarized: int, window: int, batch: int) -> int:
    """How many turns to fold now: those that left the history window uncovered, once they
    are at least a batch (else 0)."""
    due = finished - summarized - window
    return due if due >= batch else 0


def _clip(text: str, words: int) -> str:
    text = re.sub(r"\s*\[\d+(?:\s*,\s*\d+)*\]", "", text).strip()
    first = re.split(r"(?<=[.!?])\s+", text, maxsplit=1)[0]
    parts = first.split()
    return " ".join(parts[:words]) + ("…" if len(parts) > words else "")


def fold_by_rules(previous: str, turns: Sequence[HistoryTurn], max_tokens: int) -> str:
    """One line per folded turn, appended. Past the cap the oldest lines go, down to half
    the cap at once: the summary's start, the prompt's cached prefix, then stays the same
    for several folds rather than changing at every one."""
    lines = [line for line in previous.splitlines() if line and line != OMITTED]
    dropped = previous.startswith(OMITTED)
    for turn in turns:
        answer = _clip(turn["answer"], 30) or "(no answer)"
        lines.append(f"- Asked: {_clip(turn['user_query'], 25)} — Answered: {answer}")
    if count_tokens("\n".join(lines)) > max_tokens:
        while lines and count_tokens("\n".join(lines)) > max_tokens // 2:
            lines.pop(0)
        dropped = True
    return "\n".join(([OMITTED] if dropped else []) + lines)


def appended(previous: str, addition: str) -> str:
    """The summary with a fold's addition after it: the previous text stays its prefix."""
    return f"{previous}\n{addition}" if previous else addition


def _shown(previous: str, turns: Sequence[HistoryTurn]) -> str:
    transcript = "\n".join(
        f"User: {turn['user_query']}\nAssistant: {turn['answer']}" for turn in turns
    )
    return f"Existing summary:\n{previous or '(none)'}\n\nNew turns:\n{transcript}"


def addition_prompt(
    previous: str, turns: Sequence[HistoryTurn], max_tokens: int
) -> list[ChatMessage]:
    """The model prompt that summarises new turns as an addition to the running summary,
    which stays as it is (it starts every later prompt: rewriting it would void their cache)."""
    return [
        ChatMessage(
            role="system",
            content=(
                "You maintain a running summary of a conversation. Summarise only the new "
                "turns, as lines to append to the existing summary: keep facts, names, numbers "
                f"and decisions, do not repeat the existing summary, use at most "
                f"{max_tokens // 2} words. Answer with the new lines only."
            ),
        ),
        ChatMessage(
            role="user",
            content=_shown(previous, turns),
        ),
    ]


def summary_prompt(
    previous: str, turns: Sequence[HistoryTurn], max_tokens: int
) -> list[ChatMessage]:
    """The model prompt that merges the running summary and new turns into one, shorter."""
    return [
        ChatMessage(
            role="system",
            content=(
                "You maintain a running summary of a conversation. Merge the new turns into the "
                "existing summary, keeping facts, names, numbers and decisions, in at most "
                f"{max_tokens // 2} words. Answer with the summary only."
            ),
        ),
        ChatMessage(
            role="user",
            content=_shown(previous, turns),
        ),
    ]
