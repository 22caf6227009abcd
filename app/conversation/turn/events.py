"""What a running turn emits: its events, and the one builder of the `done` event that every
ending of a turn sends (complete, stopped, finished as an orphan, replayed for a retry)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from app.conversation.turn.manifest import Manifest
from app.conversation.turn.types import PublicSource, Usage


@dataclass(frozen=True)
class TurnEvent:
    """One event of a turn (`meta`, `token`, `sources`, `done` or `error`) and its data."""

    name: str
    data: dict[str, Any]
    status_code: int = 200
    done: DoneEvent | None = field(default=None, compare=False)
    """The typed outcome of a `done` event (what `data` serialises), for in-process readers."""


class DoneExtras(TypedDict, total=False):
    """The `done` fields only some endings have: each is sent exactly when it is given."""

    model: str
    latency_ms: int | None
    stopped: bool
    reason: str
    node_ms: dict[str, float]
    turn_ms: float
    sources: list[PublicSource]
    """A replayed answer carries its sources in `done` too."""


@dataclass(frozen=True)
class DoneEvent:
    """The `done` event of a turn: its outcome, the record of its triage and validation (as
    its manifest holds them), and the fields its kind of ending adds."""

    turn_id: uuid.UUID
    session_id: uuid.UUID
    status: str
    answer: str
    query_composition: str | None
    usage: Usage | Mapping[str, int]
    context_metadata: Manifest
    extras: DoneExtras = field(default_factory=lambda: DoneExtras())

    def data(self) -> dict[str, Any]:
        """The event's data as it goes on the wire."""
        metadata = self.context_metadata
        return {
            "turn_id": str(self.turn_id),
            "session_id": str(self.session_id),
            "status": self.status,
            "answer": self.answer,
            "query_composition": self.query_composition,
            "usage": dict(self.usage),
            "context_metadata": metadata.dump(),
            "triage": None if metadata.triage is None else metadata.triage.model_dump(mode="json"),
            "validation": None
            if metadata.validation is None
            else metadata.validation.model_dump(mode="json"),
            **self.extras,
        }

    def event(self) -> TurnEvent:
        """The `done` event itself (its data, and this typed outcome beside it)."""
        return TurnEvent("done", self.data(), done=self)
