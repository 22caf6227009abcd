"""Instruction-like text inside documents (prompt injection): detected, neutralised, flagged.

A document is data, not instructions. Sentences that address the assistant ("ignore all
previous instructions", "you are now…", chat-template markers) are replaced by a visible
marker, so the model never reads them as orders and an auditor can see that something was
removed; the count is recorded with the document.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

NEUTRALISED = "[instruction-like text removed]"

_PATTERNS = [
    r"\b(?:ignore|disregard|forget|override)\b[^.\n]{0,40}\b(?:previous|prior|above|earlier|all|any|your)\b[^.\n]{0,40}\b(?:instructions?|prompts?|rules|directions|context)\b",
    r"\byou\s+are\s+now\b[^.\n]{0,80}",
    r"\b(?:new|updated|real)\s+(?:system\s+)?instructions?\s*:",
    r"\b(?:reveal|print|show|output|repeat)\b[^.\n]{0,30}\b(?:system|hidden|secret)\s+(?:prompt|instructions?)\b",
    r"\bact\s+as\s+(?:an?\s+)?(?:unrestricted|jailbroken|dan)\b[^.\n]{0,60}",
    r"<\|(?:im_start|im_end|system|endoftext)\|>",
    r"^\s*(?:system|assistant)\s*:\s",
    r"\bdo\s+anything\s+now\b",
]
_INJECTION = re.compile("|".join(f"(?:{p})" for p in _PATTERNS), re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class Sanitised:
    """A document's text with instruction-like passages neutralised, and how many there were."""

    text: str
    injections: int


def neutralise_instructions(text: str) -> Sanitised:
    """Replace the passages of a document that read like orders to the model with a marker."""
    found = 0

    def replace(_: re.Match[str]) -> str:
        nonlocal found
        found += 1
        return NEUTRALISED

    return Sanitised(_INJECTION.sub(replace, text), found)
