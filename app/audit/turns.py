"""The admin audit's queries over turns: filters of SPEC §6, newest first, keyset pages."""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import Boolean, Float, Select, select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.pagination import Cursor
from app.models import QueryHistory

Composition = Literal["pure_kb", "pure_doc", "hybrid", "chat"]


@dataclass(frozen=True)
class TurnFilters:
    user_id: uuid.UUID | None = None
    session_id: uuid.UUID | None = None
    since: datetime | None = None
    until: datetime | None = None
    composition: Composition | None = None
    min_quality: float | None = None
    max_quality: float | None = None
    truncated: bool | None = None

    def as_details(self) -> dict[str, Any]:
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


def _quality() -> Any:
    return QueryHistory.context_metadata["quality_score"].astext.cast(Float)


def _truncated() -> Any:
    return QueryHistory.context_metadata["truncation_applied"].astext.cast(Boolean)


def filtered(tenant_id: uuid.UUID, filters: TurnFilters) -> Select[QueryHistory]:
    statement = select(QueryHistory).where(QueryHistory.tenant_id == tenant_id)
    if filters.user_id is not None:
        statement = statement.where(QueryHistory.user_id == filters.user_id)
    if filters.session_id is not None:
        statement = statement.where(QueryHistory.session_id == filters.session_id)
    if filters.since is not None:
        statement = statement.where(QueryHistory.created_at >= filters.since)
    if filters.until is not None:
        statement = statement.where(QueryHistory.created_at < filters.until)
    if filters.composition is not None:
        statement = statement.where(QueryHistory.query_composition == filters.composition)
    if filters.min_quality is not None:
        statement = statement.where(_quality() >= filters.min_quality)
    if filters.max_quality is not None:
        statement = statement.where(_quality() <= filters.max_quality)
    if filters.truncated is not None:
        statement = statement.where(_truncated().is_(filters.truncated))
    return statement


async def turn_page(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    filters: TurnFilters,
    *,
    limit: int,
    after: Cursor | None,
) -> list[QueryHistory]:
    """Up to `limit + 1` turns (one extra tells whether another page exists)."""
    statement = filtered(tenant_id, filters)
    if after is not None:
        statement = statement.where(
            tuple_(QueryHistory.created_at, QueryHistory.id) < tuple_(after.created_at, after.id)
        )
    statement = statement.order_by(QueryHistory.created_at.desc(), QueryHistory.id.desc()).limit(
        limit + 1
    )
    return list((await db.execute(statement)).scalars())


async def get_turn(
    db: AsyncSession, tenant_id: uuid.UUID, turn_id: uuid.UUID
) -> QueryHistory | None:
    statement = select(QueryHistory).where(
        QueryHistory.tenant_id == tenant_id, QueryHistory.id == turn_id
    )
    return (await db.execute(statement)).scalar_one_or_none()
