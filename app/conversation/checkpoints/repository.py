"""Every SQL statement on LangGraph's checkpoint tables, in one module.

Two kinds of caller: the saver (app/conversation/checkpoints/checkpointer.py) runs the tenant
setting, the schema check and the pruning on its own psycopg connections; erasure, retention,
a session's deletion and the orphan sweep run the rest in a tenant-scoped SQLAlchemy
transaction, where row-level security (migrations 0006, 0011) admits the threads of the
tenant's sessions and the rows tagged with the tenant, nothing else. The delete functions
return the number of rows removed over the three tables.

Bounded storage: a thread keeps its newest checkpoints only. Every turn stores one checkpoint
(the graph runs with `durability="exit"`) plus a blob for each channel whose version changed.
Nothing in LangGraph ever deletes them, so a session's storage grows with every turn although
only the newest checkpoint is ever read (each turn starts from a complete initial state). Each
write of a checkpoint carries `PRUNE_THREAD` in its own pipeline: checkpoints beyond the newest
`keep` go, with their pending writes and every blob no kept checkpoint refers to.

A blob is removed only if its version is older than the newest version of its channel among
the kept checkpoints: a concurrent turn of the same thread may have stored the blobs of a
checkpoint whose row is not written yet, and those are newer than anything kept.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypedDict, cast

from langgraph.checkpoint.postgres.base import SELECT_SQL
from psycopg import AsyncConnection
from psycopg.rows import DictRow
from psycopg_pool import AsyncConnectionPool
from sqlalchemy import CursorResult, text
from sqlalchemy.ext.asyncio import AsyncSession

# The saver's statements (psycopg, on its own pool).
SET_TENANT = "SELECT set_config('threadline.tenant_id', %s, false)"
_SCHEMA_VERSION = "SELECT max(v) AS v FROM checkpoint_migrations"

PRUNE_THREAD = """
WITH ranked AS (
    SELECT checkpoint_id, checkpoint,
           row_number() OVER (ORDER BY checkpoint_id DESC) AS newness
    FROM checkpoints
    WHERE thread_id = %(thread)s AND checkpoint_ns = %(ns)s
), doomed AS (
    DELETE FROM checkpoints c
    USING ranked r
    WHERE c.thread_id = %(thread)s AND c.checkpoint_ns = %(ns)s
      AND c.checkpoint_id = r.checkpoint_id AND r.newness > %(keep)s
    RETURNING c.checkpoint_id
), kept AS (
    SELECT checkpoint FROM ranked WHERE newness <= %(keep)s
), gone_writes AS (
    DELETE FROM checkpoint_writes w
    USING doomed d
    WHERE w.thread_id = %(thread)s AND w.checkpoint_ns = %(ns)s
      AND w.checkpoint_id = d.checkpoint_id
    RETURNING 1
), gone_blobs AS (
    DELETE FROM checkpoint_blobs b
    WHERE b.thread_id = %(thread)s AND b.checkpoint_ns = %(ns)s
      AND NOT EXISTS (
          SELECT 1 FROM kept k WHERE k.checkpoint -> 'channel_versions' ->> b.channel = b.version
      )
      AND b.version < (SELECT max(k.checkpoint -> 'channel_versions' ->> b.channel) FROM kept k)
    RETURNING 1
)
SELECT (SELECT count(*) FROM doomed) AS checkpoints,
       (SELECT count(*) FROM gone_writes) AS writes,
       (SELECT count(*) FROM gone_blobs) AS blobs
"""


class PruneParameters(TypedDict):
    """The bind parameters of `PRUNE_THREAD`."""

    thread: str
    ns: str
    keep: int


def prune_parameters(thread_id: str, checkpoint_ns: str, keep: int) -> PruneParameters:
    """The bind parameters of `PRUNE_THREAD` for one thread."""
    return PruneParameters(thread=thread_id, ns=checkpoint_ns, keep=keep)


async def schema_version(
    pool: AsyncConnectionPool[AsyncConnection[DictRow]], wait_seconds: float
) -> int | None:
    """The checkpoint tables' migration version, as the library's own migrations record it."""
    async with pool.connection(timeout=wait_seconds) as connection:
        cursor = await connection.execute(_SCHEMA_VERSION)
        row = await cursor.fetchone()
    return row["v"] if row else None


# The application's statements (SQLAlchemy, in the caller's tenant-scoped transaction).

# The thread's newest checkpoint, as the saver reads it (the library's own SELECT), for a turn
# whose reads share one transaction (ADR 0070).
_LATEST = text(
    SELECT_SQL
    + "WHERE thread_id = :thread AND checkpoint_ns = :ns ORDER BY checkpoint_id DESC LIMIT 1"
)


async def latest_checkpoint(db: AsyncSession, thread_id: str, ns: str) -> dict[str, Any] | None:
    """The thread's newest checkpoint row, with the columns the saver's own read returns."""
    row = (await db.execute(_LATEST, {"thread": thread_id, "ns": ns})).mappings().first()
    return None if row is None else dict(row)


_DELETE_THREAD = (
    text("DELETE FROM checkpoint_writes WHERE thread_id = :thread"),
    text("DELETE FROM checkpoint_blobs WHERE thread_id = :thread"),
    text("DELETE FROM checkpoints WHERE thread_id = :thread"),
)


async def delete_thread(db: AsyncSession, session_id: uuid.UUID) -> int:
    """Remove the LangGraph thread of a session; returns the number of rows removed.

    Runs before the session row goes: the checkpoint tables' RLS policy admits a thread only
    while its session is visible.
    """
    removed = 0
    for statement in _DELETE_THREAD:
        result = await db.execute(statement, {"thread": str(session_id)})
        removed += cast(CursorResult[Any], result).rowcount
    return removed


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
