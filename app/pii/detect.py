"""Find and anonymise personal data in free text.

Detectors validate what a pattern alone would over-match: IBANs by their ISO 7064 mod-97
checksum, card numbers by Luhn, Italian tax codes (codice fiscale) by their check letter (these
checksums come from python-stdnum), IP addresses by parsing. Matches are replaced by typed
placeholders (`[EMAIL]`, `[IBAN]`, …), so text stays readable and the kind of data removed
stays visible to an auditor.
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from stdnum import luhn
from stdnum.iso7064 import mod_97_10
from stdnum.it import codicefiscale

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
    # The ISO 7064 checksum only, not stdnum's iban.is_valid: its per-country structure checks
    # would leave a real number in an unexpected layout unredacted.
    compact = candidate.replace(" ", "")
    return 15 <= len(compact) <= 34 and mod_97_10.is_valid(compact[4:] + compact[:4])


def _luhn_valid(candidate: str) -> bool:
    digits = re.sub(r"\D", "", candidate)
    return 13 <= len(digits) <= 19 and luhn.is_valid(digits)


def _tax_code_valid(candidate: str) -> bool:
    # The check letter only, not codicefiscale.is_valid: its birth-date check would leave a
    # code with a mistyped date unredacted.
    code = candidate.upper()
    return codicefiscale.calc_check_digit(code[:15]) == code[15]


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
    """Text with its personal data replaced, and how many of each kind were found."""

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
    """How many items of each kind of personal data `text` holds."""
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
