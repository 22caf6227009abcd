"""SQL over LangGraph's checkpoint tables for erasure, retention and the orphan sweep.

Run in a tenant-scoped SQLAlchemy transaction: row-level security (migrations 0006, 0011)
admits the threads of the tenant's sessions and the rows tagged with the tenant, nothing else.
Each function returns the number of rows removed over the three tables.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import CursorResult, text
from sqlalchemy.ext.asyncio import AsyncSession

# Spelled out per table (no SQL built from strings): writes and blobs before checkpoints.
_DELETE_THREADS = (
    text("DELETE FROM checkpoint_writes WHERE thread_id = ANY(:threads)"),
    text("DELETE FROM checkpoint_blobs WHERE thread_id = ANY(:threads)"),
    text("DELETE FROM checkpoints WHERE thread_id = ANY(:threads)"),
)
_DELETE_ORPHANS = (
    text(
        "DELETE FROM checkpoint_writes x WHERE x.tenant_id = threadline_current_tenant() "
        "AND NOT EXISTS (SELECT 1 FROM chat_sessions s WHERE "
        "s.tenant_id = threadline_current_tenant() AND s.id = CAST(x.thread_id AS uuid))"
    ),
    text(
        "DELETE FROM checkpoint_blobs x WHERE x.tenant_id = threadline_current_tenant() "
        "AND NOT EXISTS (SELECT 1 FROM chat_sessions s WHERE "
        "s.tenant_id = threadline_current_tenant() AND s.id = CAST(x.thread_id AS uuid))"
    ),
    text(
        "DELETE FROM checkpoints x WHERE x.tenant_id = threadline_current_tenant() "
        "AND NOT EXISTS (SELECT 1 FROM chat_sessions s WHERE "
        "s.tenant_id = threadline_current_tenant() AND s.id = CAST(x.thread_id AS uuid))"
    ),
)


async def delete_threads(db: AsyncSession, session_ids: Sequence[uuid.UUID]) -> int:
    """Every row of these sessions' threads (thread_id = session id), in every namespace."""
    if not session_ids:
        return 0
    threads = [str(s) for s in session_ids]
    removed = 0
    for statement in _DELETE_THREADS:
        result = await db.execute(statement, {"threads": threads})
        removed += cast(CursorResult[Any], result).rowcount
    return removed


_PURGE_BEFORE = text(
    """
WITH doomed AS (
    DELETE FROM checkpoints
    WHERE tenant_id = threadline_current_tenant()
      AND (checkpoint ->> 'ts')::timestamptz < :cutoff
    RETURNING thread_id, checkpoint_ns, checkpoint_id
), gone_writes AS (
    DELETE FROM checkpoint_writes w
    USING doomed d
    WHERE w.thread_id = d.thread_id AND w.checkpoint_ns = d.checkpoint_ns
      AND w.checkpoint_id = d.checkpoint_id
    RETURNING 1
), gone_blobs AS (
    DELETE FROM checkpoint_blobs b
    WHERE (b.thread_id, b.checkpoint_ns) IN (SELECT thread_id, checkpoint_ns FROM doomed)
      AND NOT EXISTS (
          SELECT 1 FROM checkpoints c
          WHERE c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns
            AND c.checkpoint_id NOT IN (
                SELECT d.checkpoint_id FROM doomed d WHERE d.thread_id = c.thread_id
            )
            AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version
      )
    RETURNING 1
)
SELECT (SELECT count(*) FROM doomed) + (SELECT count(*) FROM gone_writes)
     + (SELECT count(*) FROM gone_blobs)
"""
)


async def purge_before(db: AsyncSession, cutoff: datetime) -> int:
    """Checkpoints taken before `cutoff` (they hold those turns' queries and answers), their
    pending writes, and the blobs no remaining checkpoint refers to."""
    return int((await db.execute(_PURGE_BEFORE, {"cutoff": cutoff})).scalar_one())


async def sweep_orphans(db: AsyncSession) -> int:
    """Rows of the tenant whose session no longer exists: left by a checkpoint write that
    raced the session's deletion (the write passed its policy check before the delete
    committed)."""
    removed = 0
    for statement in _DELETE_ORPHANS:
        result = await db.execute(statement)
        removed += cast(CursorResult[Any], result).rowcount
    return removed
