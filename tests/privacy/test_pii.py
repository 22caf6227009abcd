"""PII detection with validation: checksums keep look-alike numbers out."""

from __future__ import annotations

import pytest

from app.pii.detect import anonymize

CASES = [
    ("write to anna.bianchi@example.org", "write to [EMAIL]", "EMAIL"),
    ("call +39 333 123 4567 today", "call [PHONE] today", "PHONE"),
    ("or 02 1234 5678", "or [PHONE]", "PHONE"),
    ("IBAN IT60 X054 2811 1010 0000 0123 456", "IBAN [IBAN]", "IBAN"),
    ("GB82WEST12345698765432 is mine", "[IBAN] is mine", "IBAN"),
    ("card 4111 1111 1111 1111", "card [CARD]", "CARD"),
    ("card 5500-0000-0000-0004", "card [CARD]", "CARD"),
    ("from 192.168.10.20", "from [IP]", "IP"),
    ("v6 2001:db8::8a2e:370:7334 seen", "v6 [IP] seen", "IP"),
    ("CF RSSMRA85T10A562S", "CF [TAX_CODE]", "TAX_CODE"),
]


@pytest.mark.parametrize(("text", "expected", "kind"), CASES)
def test_each_kind_is_found_and_replaced(text: str, expected: str, kind: str) -> None:
    result = anonymize(text)
    assert result.text == expected
    assert result.found[kind] == 1


@pytest.mark.parametrize(
    "text",
    [
        "IT60X0542811101000000123457",  # IBAN with a wrong checksum
        "4111 1111 1111 1112",  # fails Luhn
        "RSSMRA85T10A562X",  # wrong check letter
        "999.10.10.10",  # not an address
        "order 12345 costs 3.50 on 2024-01-02",
    ],
)
def test_look_alikes_are_left_alone(text: str) -> None:
    assert anonymize(text).text == text
