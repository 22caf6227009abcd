"""SQL for who runs a turn: the leases of running turns, and the orphans a dead process left
(ADR 0016). Kept apart from `repository`, which writes what a turn produced."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Boolean, Float, bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY, UUID
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.process import process_id
from app.core.repository import TenantRepository
from app.models import QueryHistory

_RENEW = text(
    """
    UPDATE query_history SET lease_expires_at = clock_timestamp() + make_interval(secs => :secs)
    WHERE tenant_id = :tenant AND id = ANY(:turns) AND status = 'pending' AND lease_owner = :owner
    """
).bindparams(
    bindparam("tenant", type_=UUID(as_uuid=True)),
    bindparam("turns", type_=ARRAY(UUID(as_uuid=True))),
    bindparam("secs", type_=Float),
)

# SKIP LOCKED: two processes sweeping at once never wait on each other; one finishes the turn.
_LOCK_ORPHAN = text(
    """
    SELECT session_id, user_id, user_query, idempotency_key, created_at FROM query_history
    WHERE tenant_id = :tenant AND id = :turn AND status = 'pending'
      AND (:force OR lease_expires_at < clock_timestamp()
           OR (lease_expires_at IS NULL AND created_at < clock_timestamp() - interval '5 minutes'))
    FOR UPDATE SKIP LOCKED
    """
).bindparams(
    bindparam("tenant", type_=UUID(as_uuid=True)),
    bindparam("turn", type_=UUID(as_uuid=True)),
    bindparam("force", type_=Boolean),
)

_LEASE = text(
    """
    SELECT status, lease_owner, answer, session_id,
           coalesce(lease_expires_at < clock_timestamp(), true) AS expired
    FROM query_history WHERE tenant_id = :tenant AND id = :turn
    """
).bindparams(
    bindparam("tenant", type_=UUID(as_uuid=True)), bindparam("turn", type_=UUID(as_uuid=True))
)

_EXPIRED = text(
    """
    SELECT tenant_id, id FROM query_history
    WHERE status = 'pending'
      AND (lease_expires_at < clock_timestamp()
           -- admitted by a process without leases (a release before 0018, mid-deploy)
           OR (lease_expires_at IS NULL AND created_at < clock_timestamp() - interval '5 minutes'))
    ORDER BY coalesce(lease_expires_at, created_at) LIMIT :limit
    """
)


@dataclass(frozen=True)
class Orphan:
    """A pending turn whose process is gone, locked for finishing."""

    turn_id: uuid.UUID
    session_id: uuid.UUID
    user_id: uuid.UUID
    user_query: str
    idempotency_key: str | None
    created_at: datetime


@dataclass(frozen=True)
class Lease:
    """A turn's lease, and what a stream needs to end a finished turn."""

    status: str
    owner: str | None
    expired: bool
    """True when the owner stopped renewing it (for a finished turn: some time after)."""
    answer: str
    session_id: uuid.UUID


class TurnLeaseRepository(TenantRepository[QueryHistory]):
    """A tenant's running turns as leases: renewed by their process, locked by a finisher."""

    async def renew_leases(self, turn_ids: list[uuid.UUID], seconds: float) -> None:
        """Extend this process's leases on its running turns (one statement per tenant)."""
        await self.db.execute(
            _RENEW,
            {"tenant": self.tenant_id, "turns": turn_ids, "owner": process_id(), "secs": seconds},
        )

    async def lock_orphan(self, turn_id: uuid.UUID, *, force: bool = False) -> Orphan | None:
        """Lock a pending turn whose lease has expired (any pending turn with `force`: its
        owner is known to be gone) for the transaction; None when there is none, or when
        another process is finishing it right now."""
        row = (
            await self.db.execute(
                _LOCK_ORPHAN, {"tenant": self.tenant_id, "turn": turn_id, "force": force}
            )
        ).one_or_none()
        if row is None:
            return None
        return Orphan(
            turn_id=turn_id,
            session_id=row.session_id,
            user_id=row.user_id,
            user_query=row.user_query,
            idempotency_key=row.idempotency_key,
            created_at=row.created_at,
        )

    async def lease(self, turn_id: uuid.UUID) -> Lease | None:
        """The turn's status and lease as the database sees them now."""
        row = (
            await self.db.execute(_LEASE, {"tenant": self.tenant_id, "turn": turn_id})
        ).one_or_none()
        if row is None:
            return None
        return Lease(
            status=row.status,
            owner=row.lease_owner,
            expired=bool(row.expired),
            answer=row.answer,
            session_id=row.session_id,
        )


async def expired_leases(db: AsyncSession, limit: int) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """(tenant, turn) of pending turns whose lease has expired, every tenant's, oldest
    first: through the maintenance door (migration 0018), closed again at once."""
    await db.execute(text("SELECT set_config('threadline.maintenance', 'on', true)"))
    rows = (await db.execute(_EXPIRED, {"limit": limit})).all()
    await db.execute(text("SELECT set_config('threadline.maintenance', '', true)"))
    return [(row.tenant_id, row.id) for row in rows]
