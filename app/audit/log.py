"""Writing the audit log: who read or erased whose data, when, with which filters.

Entries are inserted in the transaction of the read itself, so a read whose entry cannot be
written fails with it: no admin read goes unrecorded. The application role may only INSERT
and SELECT `audit_log` (migration 0005): entries cannot be changed or removed by the app.
"""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from app.audit.repository import AuditLogRepository
from app.auth.principal import Principal
from app.core.json_types import JsonObject
from app.models import AuditLog


async def record(
    db: AsyncSession,
    actor: Principal,
    action: str,
    *,
    target_user_id: uuid.UUID | None = None,
    resource: str | None = None,
    details: JsonObject | None = None,
) -> None:
    """Log that `actor` did `action` (to `target_user_id`'s data, on `resource`)."""
    await AuditLogRepository(db, actor.tenant_id).add(
        AuditLog(
            tenant_id=actor.tenant_id,
            actor_user_id=actor.user_id,
            action=action,
            target_user_id=target_user_id,
            resource=resource,
            details=details or {},
        )
    )
