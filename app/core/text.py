"""Small text helpers shared by retrieval, the graph, guardrails and the tools.

`content_words` is the one definition of "the words that carry meaning" (stopwords out), so
follow-up detection, grounding checks and the tools' lexical lookups agree on it.
"""

from __future__ import annotations

import re

SNIPPET_CHARS = 300

_STOPWORDS = frozenset(
    (
        "a",
        "about",
        "also",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "can",
        "could",
        "describe",
        "did",
        "do",
        "does",
        "elaborate",
        "else",
        "expand",
        "explain",
        "for",
        "from",
        "give",
        "here",
        "how",
        "i",
        "in",
        "is",
        "it",
        "its",
        "just",
        "me",
        "more",
        "my",
        "of",
        "on",
        "one",
        "ones",
        "or",
        "our",
        "please",
        "really",
        "said",
        "say",
        "should",
        "show",
        "so",
        "some",
        "tell",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "to",
        "too",
        "us",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "whose",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
    )
)
_CONTENT_WORD = re.compile(r"[A-Za-zÀ-ÿ0-9][\w'-]*")


def content_words(text: str) -> list[str]:
    """The words of `text` that carry meaning: stopwords and punctuation left out."""
    return [w for w in _CONTENT_WORD.findall(text) if w.lower() not in _STOPWORDS]


def snippet(text: str) -> str:
    """`text` cut to a short preview for listings and source panels."""
    return text if len(text) <= SNIPPET_CHARS else text[: SNIPPET_CHARS - 1].rstrip() + "…"
