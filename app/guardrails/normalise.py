"""Text as a detector should read it: the disguises that defeat a pattern are taken off.

`fold` undoes what changes how text looks but not what a model reads: compatibility forms
(fullwidth `ｉｇｎｏｒｅ`, mathematical `𝐢𝐠𝐧𝐨𝐫𝐞`, ligatures) by NFKC, look-alike Cyrillic and
Greek letters, accents, invisible characters (zero-width spaces and joiners, soft hyphens,
bidi controls, tag characters), case, line breaks and runs of spaces, and letters spelt out
one at a time (`i g n o r e`, `i.g.n.o.r.e`). Punctuation stays, so patterns that need a
sentence boundary still see one.

`letters` goes further for fuzzy matching: only letters and digits, leetspeak digits inside
words read as letters, no spaces at all, so however the words of a phrase were split or
spaced, the same characters follow each other.

Only detectors read these forms; the text itself is never changed by them.
"""

from __future__ import annotations

import re
import unicodedata

# Cyrillic and Greek letters that NFKC keeps but that render like Latin ones: each letter of
# the first string becomes the Latin letter at the same place in the second.
_CONFUSABLES = str.maketrans(
    "авеёкмнорстухіїјѕԁɡӏոսαεικνορτυχАВЕКМНОРСТХІЈЅΑΒΕΖΗΙΚΜΝΟΡΤΥΧ",
    "abeekmhopctyxiijsdglnuaeikvoptuxABEKMHOPCTXIJSABEZHIKMNOPTYX",
)
_DROPPED = frozenset(("Mn", "Me", "Cf", "Cc", "Co", "Cs"))
_SPACE = re.compile(r"\s+")
# Three or more single letters or digits, each followed by one separator: `i g n o r e`.
# A wider gap (two spaces, ` / `) stays a word boundary.
_SPELT_OUT = re.compile(r"(?<![^\W_])(?:[^\W_][ ._*\-+~|/\\,'`]){2,}[^\W_](?![^\W_])")
_SEPARATOR = re.compile(r"[ ._*\-+~|/\\,'`]")
_WORD = re.compile(r"[^\W_]+")
_LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "8": "b"})


class _Invisible(dict[int, int | None]):
    """A `str.translate` table that deletes marks and invisible characters: each character's
    category is looked up once, then the answer is a C-level dict hit (ASCII is preloaded)."""

    LIMIT = 20_000  # distinct characters remembered: a text of every code point stays bounded

    def __init__(self) -> None:
        super().__init__({c: _kept(c) for c in range(128)})

    def __missing__(self, code: int) -> int | None:
        kept = _kept(code)
        if len(self) < self.LIMIT:
            self[code] = kept
        return kept


def _kept(code: int) -> int | None:
    """The character, unless it is a mark or invisible (line breaks and spaces stay)."""
    char = chr(code)
    return code if char.isspace() or unicodedata.category(char) not in _DROPPED else None


_INVISIBLE = _Invisible()


def fold(text: str) -> str:
    """Lower case, without disguises; one space between words; punctuation kept."""
    if not text.isascii():  # most messages are: nothing for Unicode to fold
        text = unicodedata.normalize("NFKC", text).translate(_CONFUSABLES)
        text = unicodedata.normalize("NFD", text)
    text = text.translate(_INVISIBLE)
    # Letters spelt out are joined before spaces collapse: a double space between them is
    # where a word ends.
    text = _SPELT_OUT.sub(lambda m: _SEPARATOR.sub("", m.group(0)), text.casefold())
    return _SPACE.sub(" ", text).strip()


def _unleet(word: str) -> str:
    return word.translate(_LEET) if not word.isdigit() and not word.isalpha() else word


def letters(folded: str) -> str:
    """The letters and digits of a folded text, run together; `1gn0r3` reads `ignore`."""
    return "".join(_unleet(w) for w in _WORD.findall(folded))
