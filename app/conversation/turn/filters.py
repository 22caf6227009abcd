"""What the admin audit may filter turns by (SPEC §6); the turn store applies them."""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Literal

from app.core.json_types import JsonObject

Composition = Literal["pure_kb", "pure_doc", "hybrid", "chat"]
FeedbackFilter = Literal["up", "down", "any"]


@dataclass(frozen=True)
class TurnFilters:
    """The audit's turn filters; None: not filtered on."""

    user_id: uuid.UUID | None = None
    session_id: uuid.UUID | None = None
    since: datetime | None = None
    until: datetime | None = None
    composition: Composition | None = None
    min_quality: float | None = None
    max_quality: float | None = None
    truncated: bool | None = None
    feedback: FeedbackFilter | None = None
    """Turns whose user gave this thumb ("any": either)."""
    collection_id: uuid.UUID | None = None
    """Turns that searched this knowledge-base collection (its manifest's
    `access.collections`, within the session's scope; ADR 0078)."""

    def as_details(self) -> JsonObject:
        """The filters that were set, JSON-ready, for the audit log."""
        return {
            name: value.isoformat()
            if isinstance(value, datetime)
            else str(value)
            if isinstance(value, uuid.UUID)
            else value
            for name, value in asdict(self).items()
            if value is not None
        }
