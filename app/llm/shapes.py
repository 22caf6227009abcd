"""The shapes a prompt is built from: messages, earlier turns and numbered sources.

They belong to the model library because the Responder and the grounding check read them;
the conversation stores and checkpoints them as they are (plain JSON-able TypedDicts, ids as
strings).
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from app.core.location import Location


class ChatMessage(TypedDict):
    """One message of a conversation as a client sends it or a prompt holds it."""

    role: Literal["user", "assistant", "system"]
    content: str


class HistoryTurn(TypedDict):
    """One finished earlier turn of a session, as the history window shows it."""

    turn_id: str
    user_query: str
    answer: str
    status: str


class SourceRef(TypedDict):
    """A numbered citation target: `[n]` in the answer points at chunk `id` (or, for an
    answer from the FAQ fast path, at FAQ entry `id`)."""

    n: int
    id: str
    kind: Literal["kb", "attachment", "faq"]
    source_id: str
    title: str
    score: float
    text: str
    """The passage as it went into the prompt (possibly cut to the budget)."""
    location: NotRequired[Location]
    """Where the passage is in its document (page, section…); absent when unknown."""
