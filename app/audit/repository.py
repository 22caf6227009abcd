"""SQL for the admin audit: the tenant's turns (SPEC §6 filters) and its audit log."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import Boolean, Float, Select, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.audit.turns import TurnFilters
from app.core.pagination import Cursor
from app.core.repository import TenantRepository
from app.models import AuditLog, QueryHistory


def _quality() -> Any:
    return QueryHistory.context_metadata["quality_score"].astext.cast(Float)


def _truncated() -> Any:
    return QueryHistory.context_metadata["truncation_applied"].astext.cast(Boolean)


class AuditTurnRepository(TenantRepository[QueryHistory]):
    """The tenant's turns as the audit reads them."""

    model = QueryHistory

    def filtered(self, filters: TurnFilters) -> Select[QueryHistory]:
        """The tenant's turns that pass `filters`."""
        statement = self.scoped()
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

    async def page(
        self, filters: TurnFilters, *, limit: int, after: Cursor | None
    ) -> list[QueryHistory]:
        """Up to `limit + 1` turns, newest first (one extra tells whether another page exists)."""
        return await self.keyset_page(self.filtered(filters), limit=limit, after=after)


class AuditLogRepository:
    """The tenant's audit log: entries are only ever added and read (migration 0005)."""

    def __init__(self, db: AsyncSession, tenant_id: uuid.UUID) -> None:
        self.db = db
        self.tenant_id = tenant_id

    async def add(self, entry: AuditLog) -> None:
        """Insert an entry of this tenant's, in the caller's transaction."""
        if entry.tenant_id != self.tenant_id:
            raise ValueError("entry belongs to another tenant")
        self.db.add(entry)
        await self.db.flush()

    async def page(
        self,
        *,
        actor_user_id: uuid.UUID | None,
        target_user_id: uuid.UUID | None,
        action: str | None,
        before_id: int | None,
        limit: int,
    ) -> list[AuditLog]:
        """Up to `limit + 1` entries, newest first, below `before_id` when it is given."""
        statement = select(AuditLog).where(AuditLog.tenant_id == self.tenant_id)
        if actor_user_id is not None:
            statement = statement.where(AuditLog.actor_user_id == actor_user_id)
        if target_user_id is not None:
            statement = statement.where(AuditLog.target_user_id == target_user_id)
        if action is not None:
            statement = statement.where(AuditLog.action == action)
        if before_id is not None:
            statement = statement.where(AuditLog.id < before_id)
        statement = statement.order_by(AuditLog.id.desc()).limit(limit + 1)
        return list((await self.db.execute(statement)).scalars())
