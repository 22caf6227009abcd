"""The input guardrail's checks: prompt injection and jailbreaks, abuse, personal data.

Patterns and similarity, not a model: they run in well under a millisecond on every turn and
never call out. Both read normalised text (`normalise.fold`): injection is also compared with
known attack phrasings (`injection.py`); abuse patterns aim at insults and threats aimed at
someone. The tenant
decides per check whether a hit blocks the turn, is only logged, or is ignored.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from app.guardrails import injection
from app.guardrails.normalise import fold
from app.guardrails.policy import TenantPolicy
from app.pii.detect import detect

_ABUSE = re.compile(
    r"\b(?:fuck|screw|damn)\s+(?:you|off|this bot)\b"
    r"|\byou(?:'re| are)\s+(?:an?\s+)?(?:fucking\s+)?(?:idiot|moron|stupid|useless|worthless)\b"
    r"|\b(?:i(?:'ll| will)|gonna|going to)\s+(?:kill|hurt|murder|find)\s+(?:you|him|her|them)\b"
    r"|\b(?:shut up|piece of shit|go to hell|kill yourself)\b",
    re.IGNORECASE,
)

BLOCKED_ANSWERS = {
    "injection": (
        "Sorry, I can't follow instructions that try to change how I work. "
        "Feel free to ask me a question about your documents instead."
    ),
    "abuse": (
        "I'd like to help, but I can't respond to messages like that. "
        "Could you rephrase your question?"
    ),
    "pii": (
        "Your message seems to contain personal data, which this workspace does not accept. "
        "Please remove it and ask again."
    ),
}


@dataclass(frozen=True)
class InputVerdict:
    """What the input checks decided about a user message, and what each found."""

    blocked_by: str | None
    """The first check that blocked the message; None when it passes."""
    log: list[str]
    flags: dict[str, list[str]]
    """What each check found (pattern kinds or PII kinds, never the text)."""


def check_input(
    message: str, policy: TenantPolicy, similar_embedding: bool = False
) -> InputVerdict:
    """`similar_embedding`: the semantic check (run by the caller, which holds the embedder)
    found the message close to a known attack."""

    def find_injection() -> list[str]:
        found = injection.find(message)
        return [*found, "similar: embedding"] if similar_embedding else found

    checks: tuple[tuple[str, str, Callable[[], list[str]]], ...] = (
        ("injection", policy.injection, find_injection),
        ("abuse", policy.abuse, lambda: _matches(_ABUSE, fold(message))),
        ("pii", policy.pii, lambda: sorted(detect(message))),
    )
    log: list[str] = []
    flags: dict[str, list[str]] = {}
    for name, action, find in checks:
        if action == "off":
            continue
        found = find()
        if not found:
            continue
        flags[name] = found
        if action == "block":
            log.append(f"guard_input: BLOCKED ({name})")
            return InputVerdict(name, log, flags)
        log.append(f"guard_input: FLAGGED ({name})")
    if not log:
        log.append("guard_input: PASS")
    return InputVerdict(None, log, flags)


def _matches(pattern: re.Pattern[str], text: str) -> list[str]:
    """Lower-cased matched phrases, cut short: enough to audit why, no more of the text."""
    return sorted({" ".join(m.group(0).lower().split())[:40] for m in pattern.finditer(text)})
