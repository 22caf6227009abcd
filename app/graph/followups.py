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
    r"\b(it|its|that|this|these|those|they|them|their|he|him|his|she|her|there|then|"
    r"the (?:first|second|third|fourth|fifth|last|other|former|latter|same)\b|"
    r"one|ones|more|else|also|too|elaborate|expand|why|how so|what about|how about|and)\b",
    re.IGNORECASE,
)
_CORRECTING = re.compile(
    r"^\W*(?:no\b|nope\b|sorry\b|i meant\b|i mean\b|actually\b|rather\b|not that\b)", re.I
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
_WORDS = "|".join(_ORDINALS)
# An ordinal refers to an item of the answer only as a noun phrase ("the second", "the last
# one", "third option", "number 2"); as an adverb or adjective ("download it first", "last
# year") it refers to nothing.
_ORDINAL = re.compile(
    rf"\b(?:the|that|this)\s+({_WORDS})\b"
    rf"|\b({_WORDS})\s+(?:ones?|options?|points?|items?|steps?|documents?|sources?|bullets?)\b"
    r"|\b(?:number|no\.?|#)\s*(\d+)\b",
    re.I,
)
_LIST_ITEM = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+(.+)$", re.MULTILINE)
_STRIP_CITATIONS = re.compile(r"\s*\[\d+(?:\s*,\s*\d+)*\]")


def is_follow_up(query: str, history: Sequence[HistoryTurn]) -> bool:
    """A question that leans on earlier turns: an ordinal, a correction ("No, I meant …"), a
    short question with a referring word ("that", "it", "and …", "what about"), or one with
    no content words at all ("why?")."""
    if not history:
        return False
    words = content_words(query)
    if _ORDINAL.search(query) or _CORRECTING.search(query):
        return True
    if not words:
        return True
    return bool(_REFERRING.search(query)) and len(words) <= 5


def is_correction(query: str) -> bool:
    """The question corrects the previous one ("No, I meant …", "Sorry, for …")."""
    return bool(_CORRECTING.search(query))


def _ordinal(query: str) -> int | None:
    match = _ORDINAL.search(query)
    if match is None:
        return None
    word = match.group(1) or match.group(2)
    return _ORDINALS[word.lower()] if word else int(match.group(3))


def _items(answer: str) -> list[str]:
    """Enumerated items of an answer: list lines, else its sentences."""
    answer = _STRIP_CITATIONS.sub("", answer)
    items = [item.strip() for item in _LIST_ITEM.findall(answer)]
    if len(items) >= 2:
        return items
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", answer) if s.strip()]


def _lower(words: Sequence[str]) -> set[str]:
    return {w.lower() for w in words}


def rewrite_by_rules(query: str, history: Sequence[HistoryTurn], turns: int = 1) -> str:
    """A standalone query: the words of what the follow-up refers to (the listed item an
    ordinal points at, else the last `turns` questions, newest first), then the follow-up
    itself, verbatim — a rewrite adds context, it never drops the user's words."""
    last = history[-1]
    own = _lower(content_words(query))
    ordinal = _ordinal(query)
    topic: list[str] = []
    if ordinal is not None:
        items = _items(last["answer"])
        index = ordinal - 1 if ordinal > 0 else len(items) - 1
        if 0 <= index < len(items):
            topic = content_words(items[index])[:12]
    if not topic:
        for turn in reversed(history[-turns:]):
            topic += content_words(turn["user_query"])[:12]
    seen: set[str] = set()
    context = []
    for word in topic:
        if word.lower() not in own and word.lower() not in seen:
            seen.add(word.lower())
            context.append(word)
    return " ".join([*context, query.strip()]).strip()


def keep_user_words(rewrite: str, query: str) -> str:
    """The rewrite with every content word of the question it dropped appended, in order."""
    present = _lower(content_words(rewrite))
    dropped = [w for w in dict.fromkeys(content_words(query)) if w.lower() not in present]
    return " ".join([rewrite.strip(), *dropped]).strip()


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
