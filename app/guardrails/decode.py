"""Encoded text a model can read: base64 and hex runs, rot13, reversed text.

A model decodes `aWdub3JlIGFsbCBwcmV2aW91cyBpbnN0cnVjdGlvbnM=` or reads
`snoitcurtsni suoiverp lla erongi` as easily as the plain order, so the guards read those
forms too (issue 33 item 7, ADR 0067). Only detectors read what is decoded here; the text
itself is never changed.

Bounded: at most `MAX_CANDIDATES` runs are tried and `MAX_DECODED` kept, each at most
`MAX_RUN_CHARS` long, and a text is read up to `MAX_TEXT_CHARS`; every step is linear in
what it reads. A run is kept only when it decodes to readable UTF-8 text (mostly letters
and spaces), so hashes, tokens and images (`iVBORw0KGgo…`) yield nothing.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import re

MAX_TEXT_CHARS = 40_000
MAX_CANDIDATES = 64
MAX_DECODED = 8
MAX_RUN_CHARS = 8_000
MIN_READABLE = 0.85
"""Share of a decoded run's characters that must be letters, digits, spaces or common
punctuation for it to count as text."""

# Base64 (standard or URL-safe), 16 characters or more; hex, 8 bytes or more, possibly with
# a space or colon between bytes.
_BASE64 = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{16,}={0,2}")
_HEX = re.compile(r"(?<![0-9A-Fa-f])(?:[0-9A-Fa-f]{2}[ :]?){8,}(?![0-9A-Fa-f])")
_READABLE = re.compile(r"[\w\s.,;:!?'\"()\-]")


def _readable(text: str) -> bool:
    letters = sum(c.isalpha() for c in text)
    return (
        len(text) >= 8
        and " " in text.strip()
        and letters >= len(text) // 2
        and len(_READABLE.findall(text)) >= MIN_READABLE * len(text)
    )


def _text_of(raw: bytes) -> str | None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if _readable(text) else None


def _from_base64(run: str) -> str | None:
    if run.isalpha() and (run.islower() or run.isupper()):
        return None  # one long word ("internationalisation"), not an encoding
    body = run.rstrip("=").replace("-", "+").replace("_", "/")
    try:
        return _text_of(base64.b64decode(body + "=" * (-len(body) % 4), validate=True))
    except (binascii.Error, ValueError):
        return None


def _from_hex(run: str) -> str | None:
    digits = re.sub(r"[ :]", "", run)
    if len(digits) % 2:
        return None
    try:
        return _text_of(bytes.fromhex(digits))
    except ValueError:
        return None


def decoded_runs(text: str) -> list[tuple[str, str]]:
    """The base64 and hex runs of a text that decode to readable text, as (kind, decoded),
    at most `MAX_DECODED` of them."""
    text = text[:MAX_TEXT_CHARS]
    found: list[tuple[str, str]] = []
    tried = 0
    for kind, pattern, decode in (("hex", _HEX, _from_hex), ("base64", _BASE64, _from_base64)):
        for match in pattern.finditer(text):
            tried += 1
            if tried > MAX_CANDIDATES or len(found) >= MAX_DECODED:
                return found
            decoded = decode(match.group(0)[:MAX_RUN_CHARS].strip(" :"))
            if decoded is not None:
                found.append((kind, decoded))
    return found


def variants(text: str) -> list[tuple[str, str]]:
    """What a model could read in a text besides its plain words: its decoded base64 and hex
    runs, its rot13 and its reverse, as (kind, text). rot13 and reversal are applied to the
    whole text (bounded): a part written that way reads plainly in them, and ordinary text
    read that way is gibberish no detector matches."""
    text = text[:MAX_TEXT_CHARS]
    return [
        *decoded_runs(text),
        ("rot13", codecs.encode(text, "rot13")),
        ("reversed", text[::-1]),
    ]
