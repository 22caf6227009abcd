"""Triage rules that need no database: small-talk intent and topic relevance."""

from __future__ import annotations

import re
from collections.abc import Sequence

from app.core.text import content_words

_GREETING = re.compile(
    r"^\s*(?:hi|hello|hey|hiya|howdy|greetings|good (?:morning|afternoon|evening|day)|ciao|"
    r"hallo|hoi|bonjour|hola)(?:\s+(?:there|all|everyone|threadline))?[\s!.,:)]*$",
    re.IGNORECASE,
)
_THANKS = re.compile(
    r"^\s*(?:(?:ok(?:ay)?|great|perfect|cool|nice|awesome)[\s,!.]+)?(?:thanks?|thank you|thx|ty|"
    r"cheers|much appreciated|grazie|dank ?je(?:wel)?|merci)(?:\s+(?:a lot|so much|very much|"
    r"again))?[\s!.,:)]*$",
    re.IGNORECASE,
)
_FAREWELL = re.compile(
    r"^\s*(?:bye|goodbye|good bye|see you(?: later)?|see ya|later|ciao for now|that'?s all)"
    r"[\s!.,:)]*$",
    re.IGNORECASE,
)
SMALLTALK_ANSWERS = {
    "greeting": "Hello! What would you like to know?",
    "thanks": "You're welcome! Let me know if there is anything else.",
    "farewell": "Goodbye! Come back any time.",
}


def smalltalk_intent(message: str) -> str | None:
    """`greeting`, `thanks` or `farewell` when that is all the message says; else None."""
    for intent, pattern in (
        ("greeting", _GREETING),
        ("thanks", _THANKS),
        ("farewell", _FAREWELL),
    ):
        if pattern.match(message):
            return intent
    return None


def _stem(word: str) -> str:
    """A crude stem (first five letters): `refunds`/`refunded`/`refund` meet."""
    return word.lower()[:5]


def on_topic(message: str, topics: Sequence[str]) -> bool:
    """Whether the message shares a content word (by stem) with one of the allowed topics."""
    wanted = {_stem(w) for topic in topics for w in content_words(topic)}
    return bool(wanted & {_stem(w) for w in content_words(message)})


def off_topic_answer(topics: Sequence[str]) -> str:
    """The polite refusal for a message outside the tenant's allowed topics, naming a few."""
    listed = ", ".join(topics[:5]) + (" and related subjects" if len(topics) > 5 else "")
    return (
        f"Sorry, I can only help with questions about {listed}. Could you ask about one of those?"
    )
