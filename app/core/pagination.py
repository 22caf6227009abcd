"""Opaque keyset cursors over `(created_at, id)`, newest first."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol, TypeVar

from app.core.errors import BadRequest


@dataclass(frozen=True)
class Cursor:
    """Position in a keyset listing: the last row's `(created_at, id)`."""

    created_at: datetime
    id: uuid.UUID

    def encode(self) -> str:
        """The cursor as an opaque URL-safe token for the client."""
        raw = json.dumps([self.created_at.isoformat(), str(self.id)]).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, token: str) -> Cursor:
        """The cursor `encode` made, or 400 `invalid_cursor` for anything else: a cursor
        comes from the client, so any bytes at all may arrive here."""
        try:
            padded = token + "=" * (-len(token) % 4)
            decoded = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
            if not (
                isinstance(decoded, list)
                and len(decoded) == 2
                and all(isinstance(part, str) for part in decoded)
            ):
                raise ValueError("not a pair of strings")
            created_at = datetime.fromisoformat(decoded[0])
            if created_at.tzinfo is None:
                raise ValueError("a naive time cannot be compared with a timestamptz")
            # Out of the database's range after conversion to UTC (year 1 or 9999 at the edge).
            created_at.astimezone(UTC)
            return cls(created_at, uuid.UUID(decoded[1]))
        except (ValueError, TypeError, OverflowError, RecursionError) as exc:
            raise BadRequest("The cursor is not valid.", code="invalid_cursor") from exc


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
