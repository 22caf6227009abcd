"""The input guardrail's checks: prompt injection and jailbreaks, abuse, personal data.

Patterns, not a model: they run in microseconds on every turn and never call out. They aim at
the unambiguous forms (an instruction to drop the instructions, to reveal the system prompt,
to play an unrestricted persona; insults and threats aimed at someone); the tenant decides per
check whether a hit blocks the turn, is only logged, or is ignored.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from app.guardrails.policy import TenantPolicy
from app.privacy.pii import detect

# Each form needs an object aimed at the assistant (its instructions, its prompt, its persona),
# so ordinary questions that share a verb ("Can I ignore the parking rules?", "How do I show
# the original message in Outlook?", "How do I enable developer mode on Android?") pass.
_INJECTION = re.compile(
    r"\b(?:ignore|disregard|forget|override|bypass)\b[^.!?\n]{0,40}?"
    r"\b(?:previous|prior|above|earlier|preceding|your|system)\b[^.!?\n]{0,30}?"
    r"\b(?:instructions?|prompts?|rules|guidelines|directives|constraints)\b"
    r"|\b(?:reveal|show|print|repeat|output|tell me|leak|display)\b[^.!?\n]{0,30}?"
    r"(?:\b(?:system|hidden|initial|secret)\s+(?:prompt|instructions?)\b"
    r"|\byour\s+(?:original\s+|initial\s+|first\s+)?(?:prompt|instructions)\b)"
    r"|\byou are now\b[^.!?\n]{0,40}\b(?:DAN|unrestricted|jailbroken|unfiltered|evil)\b"
    r"|\byou are (?:now )?in (?:DAN|developer|god) mode\b"
    r"|\b(?:DAN|god) mode\b"
    r"|^\W*(?:please\s+)?(?:enable|enter|activate|switch to|turn on)\s+developer\s+mode\b"
    r"|\bdeveloper mode (?:enabled|activated)\b"
    r"|\bjailbr(?:eak|oken)\b[^.!?\n]{0,20}\b(?:you|yourself|assistant|bot|AI|model)\b"
    r"|\b(?:pretend|act as if|imagine)\b[^.!?\n]{0,40}\b(?:no|without)\s+"
    r"(?:rules|restrictions|filters|guidelines|limits)\b"
    r"|<\s*/?\s*(?:system|im_start|im_end)\s*>|\[/?INST\]",
    re.IGNORECASE | re.MULTILINE,
)
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
    blocked_by: str | None
    """The first check that blocked the message; None when it passes."""
    log: list[str]
    flags: dict[str, list[str]]
    """What each check found (pattern kinds or PII kinds, never the text)."""


def check_input(message: str, policy: TenantPolicy) -> InputVerdict:
    checks: tuple[tuple[str, str, Callable[[], list[str]]], ...] = (
        ("injection", policy.injection, lambda: _matches(_INJECTION, message)),
        ("abuse", policy.abuse, lambda: _matches(_ABUSE, message)),
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
