"""Retrieved text in the prompt is data: each source's text between delimiters the model is
told about (budget.SYSTEM_PROMPT), and no source can close its delimiter early.

A document that contains `</source>` (in any case, fullwidth, or spaced) would otherwise end
its own quotation and put what follows outside it; those markers are defused to look-alikes
that end nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from app.conversation.turn.types import ChatMessage, SourceRef
from app.core.location import Location, describe

OPEN = "<source>"
CLOSE = "</source>"
# `<source>` / `</source>` however written, including the fullwidth and small forms that NFKC
# folds to `<`, so a model that reads them as the marker never meets one inside a source.
_MARKER = re.compile(r"[<＜﹤]\s*/?\s*s\s*o\s*u\s*r\s*c\s*e\b", re.IGNORECASE)


def defuse(text: str) -> str:
    """`text` with every source delimiter in it turned into a harmless `‹source`."""
    return _MARKER.sub(lambda m: "‹" + m.group(0)[1:], text)


def quote_source(n: int, title: str, text: str, location: Location | None = None) -> str:
    """One numbered source: its title line (with where the passage is, when known: the
    model is asked to cite with it), then its text between the delimiters."""
    where = describe(location)
    heading = f"{defuse(title)} ({defuse(where)})" if where else defuse(title)
    return f"[{n}] {heading}\n{OPEN}\n{defuse(text)}\n{CLOSE}"


def source_block(sources: Iterable[SourceRef]) -> str:
    """The numbered sources of a prompt, each quoted as data."""
    return "\n\n".join(
        quote_source(s["n"], s["title"], s["text"], s.get("location")) for s in sources
    )


def question_message(sources: Sequence[SourceRef], question: str) -> ChatMessage:
    """The prompt's last message, new every turn: the numbered sources, then the question."""
    if not sources:
        return ChatMessage(role="user", content=question)
    block = source_block(sources)
    return ChatMessage(role="user", content=f"Sources:\n{block}\n\nQuestion: {question}")
