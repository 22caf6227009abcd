"""Opaque keyset cursors over `(created_at, id)`, newest first.

A cursor is `<microseconds since 1970 UTC>.<id as 32 hex digits>`, so that every string of
`CURSOR_FORM` is a position (and the OpenAPI document can say exactly which strings are
cursors): one the server did not issue is a position like any other, never a 500.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol, TypeVar

from app.core.errors import BadRequest
from app.core.json_types import JsonObject

# The forms of the cursors (unanchored, for `re.fullmatch` and `cursor_schema`).
CURSOR_FORM = r"[0-9]{1,16}\.[0-9a-f]{32}"
# The audit log's cursor: an entry id (a bigint; 18 digits stay below 2**63).
ENTRY_CURSOR_FORM = r"[1-9][0-9]{0,17}"
# The user list's cursor: an e-mail address, base64url without padding.
TEXT_CURSOR_FORM = r"(?:[A-Za-z0-9_-]{4})*(?:[A-Za-z0-9_-]{2,3})?"
_CURSOR = re.compile(CURSOR_FORM)
# The largest 16-digit count of microseconds is in 2286: within Python's and PostgreSQL's range.
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def cursor_schema(form: str, what: str) -> JsonObject:
    """The documented form of a cursor parameter (`json_schema_extra`): the code answers a
    string of another form with its own 400 `invalid_cursor`, so the pattern is documented
    rather than validated by FastAPI (which would answer 422). Empty is the first page."""
    return {
        "pattern": f"^(?:{form})?$",
        "description": f"`next_cursor` of the previous page ({what}); empty or omitted for "
        "the first. Any other string is 400 `invalid_cursor`.",
    }


@dataclass(frozen=True)
class Cursor:
    """Position in a keyset listing: the last row's `(created_at, id)`."""

    created_at: datetime
    id: uuid.UUID

    def encode(self) -> str:
        """The cursor as an opaque URL-safe token for the client."""
        micros = (self.created_at - _EPOCH) // timedelta(microseconds=1)
        return f"{micros}.{self.id.hex}"

    @classmethod
    def decode(cls, token: str) -> Cursor:
        """The position a token of `CURSOR_FORM` names, or 400 `invalid_cursor` for
        anything else: a cursor comes from the client, so any bytes at all may arrive here."""
        if not _CURSOR.fullmatch(token):
            raise BadRequest("The cursor is not valid.", code="invalid_cursor")
        micros, _, hex_id = token.partition(".")
        return cls(_EPOCH + timedelta(microseconds=int(micros)), uuid.UUID(hex=hex_id))


class _Keyed(Protocol):
    @property
    def created_at(self) -> datetime: ...

    @property
    def id(self) -> uuid.UUID: ...


K = TypeVar("K", bound=_Keyed)


def split_page(rows: Sequence[K], limit: int) -> tuple[list[K], str | None]:
    """The page (rows fetched with one extra) and the cursor of the next, if any."""
    items = list(rows[:limit])
    if len(rows) <= limit or not items:
        return items, None
    last = items[-1]
    return items, Cursor(last.created_at, last.id).encode()
