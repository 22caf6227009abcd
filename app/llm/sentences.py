"""The sentences of a passage and how well each answers a question, for the extractive
responder (ADR 0077).

A passage is read line by line: a heading (a Markdown `#` line, or a short line without
closing punctuation followed by more text) is never a sentence and never glued to one; a
list item is a sentence with a full stop. A sentence answers the question by the words it
shares with it, compared by their Snowball stems in the tenant's language (the algorithms
PostgreSQL's text search stems with: "refund" meets "refunded", "fietspaden" "fietspad"), and
by meaning: the cosine of its embedding and the question's, when the responder has the
embedder.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import snowballstemmer

from app.core.location import SECTION_SEPARATOR
from app.core.text import content_words
from app.embeddings.base import Embedder, query_input

logger = logging.getLogger(__name__)

_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_MARKUP = re.compile(r"\[\d+(?:\s*,\s*\d+)*\]|^#+\s*|^[-*+]\s+|^\d+[.)]\s+|`")
_HEADING = re.compile(r"\s*#{1,6}\s")
_LIST_ITEM = re.compile(r"\s*(?:[-*+]|\d+[.)])\s+")
_ENDS_A_SENTENCE = (".", "!", "?", ":", ";", ")", '"', "'", "\u201d")
HEADING_MAX_WORDS = 12
"""A line without closing punctuation, of at most this many words, before more text, is a
heading (PDF and Word extractions lose the `#`)."""
MIN_WORDS = 4
"""Shorter pieces ("See below.") answer nothing on their own."""
SEMANTIC_FLOOR = 0.5
"""The cosine from which a sentence sharing no word with the question still answers it
(all-MiniLM: related sentences are ~0.5 and above, unrelated ones ~0.1-0.3)."""


RELATIVE_FLOOR = 0.6
"""A sentence scoring under this share of the best answering one is not quoted."""
MAX_EMBEDDED_SENTENCES = 48
"""The most candidate sentences embedded for one answer (one batch of the embedder's)."""


DEFAULT_LANGUAGE = "english"
_ALGORITHMS = frozenset(snowballstemmer.algorithms())


_POSTGRESQL_NAMES = {"dutch": "dutch_porter"}
"""Where PostgreSQL's stemmer is an algorithm Snowball has since renamed: its `dutch` stems
"fietspaden" to "fietspad", Snowball 3's new `dutch` to "fietspaad"."""


@lru_cache(maxsize=16)
def _stemmer(language: str) -> Any:
    """The Snowball stemmer PostgreSQL's text-search configuration `language` stems with
    (`english`, `dutch`, `italian`…); None for one without (`simple`)."""
    algorithm = _POSTGRESQL_NAMES.get(language, language)
    return snowballstemmer.stemmer(algorithm) if algorithm in _ALGORITHMS else None


def stems(text: str, language: str = DEFAULT_LANGUAGE) -> set[str]:
    """The content words of `text` as Snowball stems of `language` (the tenant's), and as
    written (a word of another language is then matched at least as itself)."""
    words = [w.lower() for w in content_words(text) if len(w) > 2]
    stemmer = _stemmer(language)
    return set(words) | (set(stemmer.stemWords(words)) if stemmer is not None else set())


# Words that give a question its form, not its topic ("How long does it take?"): matched
# by their stems they would make "takes effect" an answer to any question of that shape.
QUESTION_FORM_WORDS = frozenset(
    {"take", "long", "get", "make", "go", "need", "want", "know", "find", "give", "use", "mean"}
)


def question_stems(question: str, language: str = DEFAULT_LANGUAGE) -> set[str]:
    """The stems a sentence must share with the question to answer it by its words."""
    return stems(question, language) - QUESTION_FORM_WORDS


@dataclass(frozen=True)
class Sentence:
    """A sentence of a passage, its position, and the heading it sits under (if any)."""

    text: str
    index: int
    heading: str | None


def _full_stop(sentence: str) -> str:
    return sentence if not sentence or sentence.endswith(_ENDS_A_SENTENCE) else sentence + "."


def _is_heading(line: str, following: str | None) -> bool:
    if _HEADING.match(line):
        return True
    stripped = line.strip()
    return (
        following is not None
        and not _LIST_ITEM.match(line)
        and not stripped.endswith(_ENDS_A_SENTENCE)
        and len(stripped.split()) <= HEADING_MAX_WORDS
    )


def _lines(text: str) -> list[str]:
    """The passage's non-empty lines, a line wrapped mid-sentence (the next one goes on in
    lower case, as PDF text does) joined to its continuation."""
    lines: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if (
            lines
            and line.lstrip()[:1].islower()
            and not lines[-1].rstrip().endswith(_ENDS_A_SENTENCE)
            and not _HEADING.match(lines[-1])
        ):
            lines[-1] = f"{lines[-1].rstrip()} {line.strip()}"
        else:
            lines.append(line)
    return lines


def sentences(text: str) -> list[Sentence]:
    """The passage's sentences in order, without markup or bracketed numbers that would read
    as citations; headings are kept aside as each sentence's `heading`."""
    lines = _lines(text)
    found: list[Sentence] = []
    heading: str | None = None
    for position, line in enumerate(lines):
        following = lines[position + 1] if position + 1 < len(lines) else None
        if _is_heading(line, following):
            heading = _MARKUP.sub("", line).strip() or heading
            continue
        for piece in _SENTENCE.split(line):
            cleaned = _full_stop(_MARKUP.sub("", piece).strip())
            if len(cleaned.split()) >= MIN_WORDS:
                found.append(Sentence(cleaned, len(found), heading))
    return found


def relevance(
    sentence: Sentence,
    question: set[str],
    similarity: float | None,
    weights: Mapping[str, float] | None = None,
    language: str = DEFAULT_LANGUAGE,
) -> tuple[float, bool]:
    """How well the sentence answers: the question's stems it shares (each by its weight,
    1 unless given) plus its cosine to the question; and whether it answers at all (a
    shared stem, or a cosine past the floor)."""
    shared = stems(sentence.text, language) & question
    cosine = max(similarity or 0.0, 0.0)
    weight = sum((weights or {}).get(stem, 1.0) for stem in shared)
    return weight + cosine, bool(shared) or cosine >= SEMANTIC_FLOOR


def best(
    candidates: Sequence[Sentence],
    question: set[str],
    limit: int,
    similarities: Mapping[str, float] | None = None,
    language: str = DEFAULT_LANGUAGE,
) -> list[Sentence]:
    """The `limit` sentences that answer best (none if none answers), in passage order."""
    return chosen([candidates], question, limit, similarities, language)[0]


def chosen(
    passages: Sequence[Sequence[Sentence]],
    question: set[str],
    limit: int,
    similarities: Mapping[str, float] | None = None,
    language: str = DEFAULT_LANGUAGE,
) -> list[list[Sentence]]:
    """For each passage, its at most `limit` sentences that answer the question, in passage
    order, among all the passages' answers: a question word in several passages weighs less
    (1 / the passages it is in), and a sentence scoring under `RELATIVE_FLOOR` of the best
    one is left out ("renew my passport" quotes the passport's page, not the driving
    licence's because it also says "renewing")."""
    passage_stems = [
        set().union(*(stems(s.text, language) for s in passage)) for passage in passages
    ]
    weights = {
        stem: 1.0 / max(1, sum(stem in found for found in passage_stems)) for stem in question
    }
    scored: list[list[tuple[float, Sentence]]] = []
    for passage in passages:
        answers = []
        for sentence in passage:
            similarity = similarities.get(sentence.text) if similarities else None
            score, answering = relevance(sentence, question, similarity, weights, language)
            if answering:
                answers.append((score, sentence))
        scored.append(answers)
    top = max((score for answers in scored for score, _ in answers), default=0.0)
    result = []
    for answers in scored:
        kept = [item for item in answers if item[0] >= RELATIVE_FLOOR * top]
        best_first = sorted(kept, key=lambda item: (-item[0], item[1].index))[:limit]
        result.append(sorted((sentence for _, sentence in best_first), key=lambda s: s.index))
    return result


def _below_title(section: str, title: str) -> str:
    """A section path without the document's own title heading at its top (the path
    Guide, then Setup, in a document titled Guide is Setup; Guide alone adds nothing)."""
    if not title or section.strip() == title.strip():
        return "" if title else section
    head, separator, rest = section.partition(SECTION_SEPARATOR)
    return rest if separator and head.strip() == title.strip() else section


def describe_location(title: str, location: Mapping[str, Any] | None) -> str | None:
    """Where a quote is from, in words ("Refund policy, pages 12-13, section 3 Refunds"),
    when its source knows a location; None otherwise. "page", not "p.": an abbreviation's
    full stop would end a sentence for everything that reads the answer by sentences."""
    if not location:
        return None
    parts = [title] if title else []
    page, last = location.get("page"), location.get("page_end")
    if page is not None:
        parts.append(f"pages {page}-{last}" if last not in (None, page) else f"page {page}")
    if location.get("slide") is not None:
        parts.append(f"slide {location['slide']}")
    if location.get("sheet"):
        parts.append(f"sheet {location['sheet']}")
    rows = location.get("rows")  # "first-last" (app.core.location), or a pair
    if rows:
        parts.append(
            f"rows {rows[0]}-{rows[1]}" if isinstance(rows, list | tuple) else f"rows {rows}"
        )
    if location.get("chapter"):
        parts.append(f"chapter {location['chapter']}")
    section = _below_title(str(location.get("section") or ""), title)
    if section:
        parts.append(f"section {section}")
    return ", ".join(str(part) for part in parts) if len(parts) > (1 if title else 0) else None


async def similarities(
    embedder: Embedder, question: str, passages: Sequence[str]
) -> dict[str, float] | None:
    """Each candidate sentence of the passages by its cosine to the question (one embedder
    batch; vectors are unit length), or None when there is none or the embedder fails (the
    words still choose: an answer without meaning beats none)."""
    candidates = list(dict.fromkeys(s.text for passage in passages for s in sentences(passage)))[
        :MAX_EMBEDDED_SENTENCES
    ]
    if not candidates:
        return None
    try:
        vectors = await embedder.embed([query_input(question), *candidates])
    except Exception:
        logger.warning("extractive answer without similarities", exc_info=True)
        return None
    asked = vectors[0]
    return {
        text: sum(a * b for a, b in zip(asked, vector, strict=True))
        for text, vector in zip(candidates, vectors[1:], strict=True)
    }
