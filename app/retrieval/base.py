"""The retrieval interface the chat pipeline calls."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Literal, Protocol

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.location import Location

PassageKind = Literal["kb", "attachment"]


@dataclass(frozen=True)
class Passage:
    """One retrieved chunk. `id` is the chunk id; `source_id` its document or attachment."""

    id: str
    kind: PassageKind
    source_id: str
    title: str
    text: str
    score: float
    location: Location = field(default_factory=Location)
    """Where the chunk is in its document (`{}` when unknown)."""


@dataclass(frozen=True)
class Hit:
    """A passage as a search returns it, with its document's external id (if any)."""

    passage: Passage
    external_id: str | None

    @property
    def chunk_id(self) -> str:
        """The chunk's id (the fusion's key)."""
        return self.passage.id

    @property
    def document_key(self) -> str:
        """Which document or attachment the chunk belongs to."""
        return f"{self.passage.kind}:{self.passage.source_id}"

    @property
    def score(self) -> float:
        """The passage's score (its leg's, or fused)."""
        return self.passage.score


@dataclass(frozen=True)
class WeightedQuery:
    """One query of a turn: its name (`question`, `history`, `rewrite`), text and weight."""

    name: str
    text: str
    weight: float


@dataclass(frozen=True)
class MultiQueryResult:
    """The fused passages, best first, and which queries brought each (by chunk id)."""

    hits: list[Hit]
    contributions: dict[str, list[str]]


class Retriever(Protocol):
    """Finds the passages an answer may draw on, for the chat pipeline and its tools."""

    async def search(
        self,
        db: AsyncSession,
        tenant_id: uuid.UUID,
        query: str,
        *,
        attachment_ids: Sequence[uuid.UUID],
        k: int,
    ) -> list[Passage]:
        """The `k` best passages of the tenant's knowledge base and of these attachments.

        `db` is already scoped to `tenant_id`; implementations filter by it as well.
        """
        ...

    async def search_queries(
        self,
        transaction: Callable[[], AbstractAsyncContextManager[AsyncSession]],
        tenant_id: uuid.UUID,
        queries: Sequence[WeightedQuery],
        *,
        attachment_ids: Sequence[uuid.UUID],
        k: int,
        cited: Callable[[AsyncSession], Awaitable[Sequence[str]]] | None = None,
        cited_weight: float = 0.0,
    ) -> MultiQueryResult:
        """The `k` best passages for several weighted queries and the chunks an earlier
        answer cited (read by `cited`), fused as one search; with which query brought each.
        `transaction()` opens a transaction scoped to `tenant_id` (one per query, at once)."""
        ...
