"""Citation integrity: every `[n]` in an answer must point at a numbered source."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from app.conversation.turn.types import SourceRef

_CITATION = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")


@dataclass(frozen=True)
class CheckedAnswer:
    """An answer without its dangling citations, the sources it cites, and how many were removed."""

    text: str
    cited: list[int]
    removed: int


def check_citations(answer: str, sources: Sequence[SourceRef]) -> CheckedAnswer:
    """Keep citations of existing sources; remove (and count) the ones that point at nothing."""
    valid = {s["n"] for s in sources}
    cited: list[int] = []
    removed = 0

    def keep(match: re.Match[str]) -> str:
        nonlocal removed
        numbers = [int(n) for n in re.split(r"\s*,\s*", match.group(1))]
        good = [n for n in numbers if n in valid]
        removed += len(numbers) - len(good)
        cited.extend(n for n in good if n not in cited)
        return f"[{', '.join(str(n) for n in good)}]" if good else ""

    text = _CITATION.sub(keep, answer)
    if removed:
        text = re.sub(r"[ \t]+([.,;:!?])", r"\1", re.sub(r"[ \t]{2,}", " ", text))
    return CheckedAnswer(text=text, cited=cited, removed=removed)
