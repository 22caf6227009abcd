"""Opaque keyset cursors over `(created_at, id)`, newest first."""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import dataclass
from datetime import datetime

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
