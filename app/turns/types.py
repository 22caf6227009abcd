"""The shapes a turn is made of, shared by the chat runtime, the graph and the turn store.

Plain JSON-able TypedDicts (ids are strings): they are checkpointed, cached in Redis and
stored in `query_history` as they are.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict


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


class PassageData(TypedDict):
    """A retrieved passage (KB chunk or attachment chunk) with its relevance score."""

    id: str
    kind: Literal["kb", "attachment"]
    source_id: str
    title: str
    text: str
    score: float


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


class Usage(TypedDict):
    """The model's token counts for one turn."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cached_prompt_tokens: NotRequired[int]
    """Of `prompt_tokens`, those the provider read from its prompt cache (0 if none)."""
