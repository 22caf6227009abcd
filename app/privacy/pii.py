"""Find and anonymise personal data in free text.

Detectors validate what a pattern alone would over-match: IBANs by their ISO 7064 mod-97
checksum, card numbers by Luhn, Italian tax codes (codice fiscale) by their check letter, IP
addresses by parsing. Matches are replaced by typed placeholders (`[EMAIL]`, `[IBAN]`, …), so
text stays readable and the kind of data removed stays visible to an auditor.
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

_EMAIL = re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]){11,30}\b")
_CARD = re.compile(r"\b\d(?:[ -]?\d){12,18}\b")
_TAX_CODE = re.compile(
    r"\b[A-Z]{6}[0-9LMNPQRSTUV]{2}[ABCDEHLMPRST][0-9LMNPQRSTUV]{2}[A-Z][0-9LMNPQRSTUV]{3}[A-Z]\b",
    re.IGNORECASE,
)
_IPV4 = re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b")
_IPV6 = re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])")
# International (+CC …) or a leading 0 with enough digits; separators allowed.
_PHONE = re.compile(r"(?<![\w+])(?:\+\d{1,3}[ .-]?)?(?:\(?\d{2,4}\)?[ .-]?){2,4}\d{2,4}(?!\w)")


def _iban_valid(candidate: str) -> bool:
    compact = candidate.replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    rearranged = compact[4:] + compact[:4]
    digits = "".join(str(int(ch, 36)) for ch in rearranged)
    return int(digits) % 97 == 1


def _luhn_valid(candidate: str) -> bool:
    digits = [int(d) for d in re.sub(r"\D", "", candidate)]
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for index, digit in enumerate(reversed(digits)):
        if index % 2 == 1:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return total % 10 == 0


_CF_ODD = {
    **dict(zip("0123456789", [1, 0, 5, 7, 9, 13, 15, 17, 19, 21], strict=True)),
    **dict(
        zip(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
            [
                1,
                0,
                5,
                7,
                9,
                13,
                15,
                17,
                19,
                21,
                2,
                4,
                18,
                20,
                11,
                3,
                6,
                8,
                12,
                14,
                16,
                10,
                22,
                25,
                24,
                23,
            ],
            strict=True,
        )
    ),
}


def _tax_code_valid(candidate: str) -> bool:
    code = candidate.upper()
    total = 0
    for index, ch in enumerate(code[:15]):
        if index % 2 == 0:  # 1st, 3rd, ... (odd positions, 1-based)
            total += _CF_ODD[ch]
        else:
            total += int(ch) if ch.isdigit() else ord(ch) - ord("A")
    return chr(ord("A") + total % 26) == code[15]


def _ip_valid(candidate: str) -> bool:
    try:
        ipaddress.ip_address(candidate)
        return True
    except ValueError:
        return False


def _phone_valid(candidate: str) -> bool:
    digits = re.sub(r"\D", "", candidate)
    return 8 <= len(digits) <= 15 and (candidate.lstrip().startswith(("+", "0", "(")))


@dataclass(frozen=True)
class _Detector:
    kind: str
    pattern: re.Pattern[str]
    valid: Callable[[str], bool] = lambda _: True


# Order matters: the more specific, validated kinds claim their text first.
_DETECTORS = (
    _Detector("EMAIL", _EMAIL),
    _Detector("IBAN", _IBAN, _iban_valid),
    _Detector("TAX_CODE", _TAX_CODE, _tax_code_valid),
    _Detector("CARD", _CARD, _luhn_valid),
    _Detector("IP", _IPV4, _ip_valid),
    _Detector("IP", _IPV6, _ip_valid),
    _Detector("PHONE", _PHONE, _phone_valid),
)


@dataclass
class Anonymized:
    text: str
    found: Counter[str] = field(default_factory=Counter)


def anonymize(text: str) -> Anonymized:
    """Replace every detected item by `[KIND]`; count what was replaced, by kind."""
    found: Counter[str] = Counter()
    for detector in _DETECTORS:

        def replace(match: re.Match[str], detector: _Detector = detector) -> str:
            if not detector.valid(match.group(0)):
                return match.group(0)
            found[detector.kind] += 1
            return f"[{detector.kind}]"

        text = detector.pattern.sub(replace, text)
    return Anonymized(text, found)


def detect(text: str) -> Counter[str]:
    return anonymize(text).found


def matches(text: str) -> list[tuple[str, str]]:
    """Each detected item as (kind, the text matched), in detection order."""
    found: list[tuple[str, str]] = []
    for detector in _DETECTORS:

        def replace(match: re.Match[str], detector: _Detector = detector) -> str:
            if not detector.valid(match.group(0)):
                return match.group(0)
            found.append((detector.kind, match.group(0)))
            return f"[{detector.kind}]"

        text = detector.pattern.sub(replace, text)
    return found
