"""Pure-Python work on a turn's history, kept off the event loop when the history is long.

Reading a conversation (personal data, follow-up cues, relatedness, the planned queries) is
string work that grows with the history's length; on the event loop, a 96,000-character
client-sent history held every other request for a few hundred milliseconds (issue 33,
py-spy under `bench.attacks`). A short history is read in place: a thread hop costs more
than the work.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

INLINE_CHARS = 8_000
"""Up to this many characters of history, the work runs in place (about a millisecond)."""


def chars_of(texts: Iterable[str]) -> int:
    """How much text a history holds."""
    return sum(len(text) for text in texts)


async def run_sized(size: int, work: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """`work(*args, **kwargs)`: in place for a short history (`size` characters), else on
    a thread."""
    if size <= INLINE_CHARS:
        return work(*args, **kwargs)
    return await asyncio.to_thread(work, *args, **kwargs)
