"""The output guardrail: a leaked system prompt, instruction-like text, personal data, and
links no source contains.

Leaked instructions are found as any run of `LEAK_NGRAM` consecutive words of the system
prompt, or a sentence (three words or more) quoted from it whole; those sentences are
removed. Sentences that read as an injection (the input guardrail's detector, on normalised
text: an order to the assistant quoted from a poisoned document, such as one to reveal a
password) are removed too; a hit that spans sentences is flagged. Personal data the sources
do not contain (a source may legitimately give a support address, the user may give their
own) is replaced by its typed placeholder, and links that appear in no source by a marker:
found as a Markdown or HTML renderer would load them (app/guardrails/links.py).
When removing a leak or an order leaves too little, the whole answer is replaced by a safe
fallback. The caller keeps the original for the audit.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from app.core.text import content_words
from app.guardrails import injection
from app.guardrails.decode import variants
from app.guardrails.directives import relayed_order
from app.guardrails.links import canonical, remove_links
from app.guardrails.normalise import fold
from app.pii.detect import matches

LEAK_NGRAM = 6
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[a-z0-9']+")
SAFE_FALLBACK = (
    "I'm sorry, I can't share that answer. Please rephrase your question, or ask about the "
    "documents available to you."
)
MIN_CONTENT_WORDS = 3
LEAK_CONTENT_WORDS = 7
"""Content words of the system prompt, in its order, that make a leak however many filler
words stand between them (at most `FILLER_GAP` between two)."""
FILLER_GAP = 3


@dataclass
class OutputVerdict:
    """An answer after the output checks: its (possibly replaced) text and the issues found."""

    text: str
    issues: list[str] = field(default_factory=list)
    replaced: bool = False

    @property
    def safe(self) -> bool:
        """Whether the checks found nothing wrong with the answer."""
        return not self.issues


def _ngrams(words: list[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def check_output(answer: str, system_prompts: Sequence[str], known: Sequence[str]) -> OutputVerdict:
    """`known`: the texts the answer may quote personal data and links from (the sources,
    and the user's own message: echoing their own address back is not a leak)."""
    verdict = OutputVerdict(answer)
    prompt_words = [_WORD.findall(p.lower()) for p in system_prompts]
    secret = set().union(*(_ngrams(words, LEAK_NGRAM) for words in prompt_words))
    spoken = [" " + " ".join(words) + " " for words in prompt_words]
    in_order = [_content_positions(words) for words in prompt_words]
    pieces = re.split(r"((?<=[.!?])\s+|\n+)", answer)  # keep separators: layout survives
    kept: list[str] = []
    leaked = 0
    for piece in pieces:
        # The sentence as written, and as a model would read it decoded (base64, hex, rot13,
        # reversed; bounded in count and length by `decode`).
        readings = [piece, *(text for _, text in variants(piece))] if piece.strip() else []
        for reading in readings:
            words = _WORD.findall(reading.lower())
            quoted = len(words) >= 3 and any(f" {' '.join(words)} " in p for p in spoken)
            if (
                quoted
                or _ngrams(words, LEAK_NGRAM) & secret
                or any(_chain(words, positions) >= LEAK_CONTENT_WORDS for positions in in_order)
            ):
                leaked += 1
                break
        else:
            kept.append(piece)
    text = "".join(kept).strip()
    if leaked:
        verdict.issues.append(f"system prompt leaked: {leaked} sentence(s) removed")
    text, ordered = _without_instructions(text)
    if ordered:
        verdict.issues.append(f"instruction-like text removed: {ordered} sentence(s)")
    elif injection.find(text):
        verdict.issues.append("instruction-like text across sentences")

    corpus = "\n".join(known)
    for kind, value in matches(text):
        if value not in corpus:
            text = text.replace(value, f"[{kind}]")
            verdict.issues.append(f"personal data removed: {kind}")
    text, links = remove_links(text, lambda url: url in corpus or canonical(url) in corpus)
    verdict.issues.extend(["link not found in any source removed"] * links)

    if (leaked or ordered) and len(content_words(text)) < MIN_CONTENT_WORDS:
        verdict.text, verdict.replaced = SAFE_FALLBACK, True
    else:
        verdict.text = text
    return verdict


def _without_instructions(text: str) -> tuple[str, int]:
    """The text without its sentences that read as orders to the assistant, or as a source's
    order to its reader to send data somewhere or sign in elsewhere, and how many."""
    pieces = re.split(r"((?<=[.!?])\s+|\n+)", text)
    kept = [
        p
        for p in pieces
        if not p.strip() or not (injection.find(p) or relayed_order(fold(p[:_MAX_SENTENCE])))
    ]
    return "".join(kept).strip(), (len(pieces) - len(kept))


_MAX_SENTENCE = 4_000


def _content_positions(words: list[str]) -> dict[str, list[int]]:
    """Where each content word stands in the system prompt's sequence of content words."""
    content = [w for w in words if w not in injection._STOP]
    positions: dict[str, list[int]] = {}
    for index, word in enumerate(content):
        positions.setdefault(word, []).append(index)
    return positions


def _chain(words: list[str], positions: dict[str, list[int]]) -> int:
    """The longest run of the prompt's consecutive content words found in `words` in order,
    at most `FILLER_GAP` other content words between two of them ("You are, um, Threadline, like,
    an assistant..."). Linear: each word looks up its few places in the prompt."""
    ending: dict[int, tuple[int, int]] = {}  # prompt index -> (answer position, run length)
    best = 0
    # Content words only, on both sides: the prompt's own "the", "and", "to" are not filler.
    for here, word in enumerate(w for w in words if w not in injection._STOP):
        found = []
        for index in positions.get(word, ()):
            before = ending.get(index - 1)
            length = before[1] + 1 if before and here - before[0] <= FILLER_GAP + 1 else 1
            found.append((index, length))
        for index, length in found:
            current = ending.get(index)
            if current is None or length >= current[1] or here - current[0] > FILLER_GAP + 1:
                ending[index] = (here, length)
            best = max(best, length)
    return best
