"""Opaque keyset cursors over `(created_at, id)`, newest first."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, TypeVar

from app.core.errors import BadRequest


@dataclass(frozen=True)
class Cursor:
    created_at: datetime
    id: uuid.UUID

    def encode(self) -> str:
        raw = json.dumps([self.created_at.isoformat(), str(self.id)]).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, token: str) -> Cursor:
        try:
            padded = token + "=" * (-len(token) % 4)
            created_at, object_id = json.loads(base64.urlsafe_b64decode(padded))
            return cls(datetime.fromisoformat(created_at), uuid.UUID(object_id))
        except (ValueError, TypeError) as exc:
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
