"""SQL of the audit log (the turns the audit reads are the turn store's)."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import AuditLog


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
