"""The shapes a turn is made of, shared by the chat runtime, the graph and the turn store.

Plain JSON-able TypedDicts (ids are strings): they are checkpointed, cached in Redis and
stored in `query_history` as they are. The prompt's own shapes (messages, earlier turns, numbered
sources) are the model library's (`app/llm/shapes.py`), re-exported here.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from app.core.location import Location
from app.llm.shapes import ChatMessage, HistoryTurn, SourceRef

__all__ = [
    "ChatMessage",
    "HistoryTurn",
    "PassageData",
    "PublicSource",
    "SourceRef",
    "TurnMeta",
    "Usage",
]


class PassageData(TypedDict):
    """A retrieved passage (KB chunk or attachment chunk) with its relevance score."""

    id: str
    kind: Literal["kb", "attachment"]
    source_id: str
    title: str
    text: str
    score: float
    location: NotRequired[Location]
    """Where the chunk is in its document (absent for chunks indexed before 0029)."""


class PublicSource(TypedDict):
    """A source as the client sees it (`SourceOut`): a snippet, not the passage."""

    n: int
    id: str
    kind: Literal["kb", "attachment", "faq"]
    source_id: str
    title: str
    score: float
    snippet: str
    cited: bool
    location: Location


class TurnMeta(TypedDict):
    """The `meta` event's data: the turn, and the composition it was read as."""

    session_id: str
    turn_id: str
    query_composition: str


class Usage(TypedDict):
    """The model's token counts for one turn."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cached_prompt_tokens: NotRequired[int]
    """Of `prompt_tokens`, those the provider read from its prompt cache (0 if none)."""
