"""Follow-up questions: detect them, and rewrite them into standalone retrieval queries.

"Tell me more about that one" cannot be searched for; "refund policy for damaged goods" can.
Rules work without a language model; with one, it writes the rewrite and the rules remain
the fallback.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from app.core.text import content_words
from app.turns.types import ChatMessage, HistoryTurn

_REFERRING = re.compile(
    r"\b(it|its|that|this|these|those|they|them|their|the (?:first|second|third|fourth|fifth|"
    r"last|other|former|latter|same)\b|one|ones|more|else|also|too|elaborate|expand|why|"
    r"how so|what about|how about|and)\b",
    re.IGNORECASE,
)
_ORDINALS = {
    "first": 1,
    "1st": 1,
    "second": 2,
    "2nd": 2,
    "third": 3,
    "3rd": 3,
    "fourth": 4,
    "4th": 4,
    "fifth": 5,
    "5th": 5,
    "last": -1,
}
_ORDINAL = re.compile(r"\b(" + "|".join(_ORDINALS) + r")\b|\b(?:number|no\.?|#)\s*(\d+)\b", re.I)
_LIST_ITEM = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+(.+)$", re.MULTILINE)
_STRIP_CITATIONS = re.compile(r"\s*\[\d+(?:\s*,\s*\d+)*\]")


def is_follow_up(query: str, history: Sequence[HistoryTurn]) -> bool:
    """A question that leans on earlier turns: an ordinal, a short question with a referring
    word ("that", "it", "and …", "what about"), or one with no content words at all ("why?")."""
    if not history:
        return False
    words = content_words(query)
    if _ORDINAL.search(query):
        return True
    if not words:
        return True
    return bool(_REFERRING.search(query)) and len(words) <= 5


def _ordinal(query: str) -> int | None:
    match = _ORDINAL.search(query)
    if match is None:
        return None
    if match.group(1):
        return _ORDINALS[match.group(1).lower()]
    return int(match.group(2))


def _items(answer: str) -> list[str]:
    """Enumerated items of an answer: list lines, else its sentences."""
    answer = _STRIP_CITATIONS.sub("", answer)
    items = [item.strip() for item in _LIST_ITEM.findall(answer)]
    if len(items) >= 2:
        return items
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", answer) if s.strip()]


def rewrite_by_rules(query: str, history: Sequence[HistoryTurn]) -> str:
    """A standalone query from the follow-up and the turn it follows."""
    last = history[-1]
    ordinal = _ordinal(query)
    if ordinal is not None:
        items = _items(last["answer"])
        index = ordinal - 1 if ordinal > 0 else len(items) - 1
        if 0 <= index < len(items):
            topic = " ".join(content_words(items[index])[:12])
            return " ".join([*content_words(query)[:6], topic]).strip() or topic
    topic_words = content_words(last["user_query"])
    own = [w for w in content_words(query) if w.lower() not in {t.lower() for t in topic_words}]
    return " ".join([*topic_words[:12], *own[:8]]).strip() or query


def rewrite_prompt(query: str, history: Sequence[HistoryTurn]) -> list[ChatMessage]:
    """The model prompt that rewrites a follow-up into a standalone search query."""
    transcript = "\n".join(
        f"User: {turn['user_query']}\nAssistant: {turn['answer'][:600]}" for turn in history[-3:]
    )
    return [
        ChatMessage(
            role="system",
            content=(
                "Rewrite the user's last message into one standalone search query that can be "
                "understood without the conversation. Resolve pronouns and ordinals ('the "
                "second one') to what they refer to. Answer with the query only."
            ),
        ),
        ChatMessage(role="user", content=f"Conversation:\n{transcript}\n\nLast message: {query}"),
    ]
