"""The statements of the tenants' own HNSW indexes (ADR 0095), on an owner-role connection
in autocommit: `CREATE INDEX CONCURRENTLY` cannot run inside a transaction."""

from __future__ import annotations

import uuid

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

PREFIX = "ix_kb_chunks_hnsw_t_"
"""A tenant's index is this and its id's 32 hex digits (52 characters, under PostgreSQL's 63)."""
_LOCK = 0x7468_7265_6164  # one builder at a time, whichever process runs it

_INDEXES = text(
    r"""
    SELECT c.relname AS name, i.indisvalid AS valid
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
    WHERE i.indrelid = 'kb_chunks'::regclass AND c.relname LIKE 'ix\_kb\_chunks\_hnsw\_t\_%'
    """
)
# Counted by the chunk triggers (migration 0010): no scan of the chunks.
_SIZES = text(
    """
    SELECT s.tenant_id, s.chunks, (sum(s.chunks) OVER ())::bigint AS total
    FROM kb_corpus_stats s JOIN tenants t ON t.id = s.tenant_id
    """
)


def index_name(tenant_id: uuid.UUID) -> str:
    """The name of the tenant's own HNSW index."""
    return PREFIX + tenant_id.hex


def tenant_of(name: str) -> uuid.UUID | None:
    """The tenant whose index this is (None: not a name `index_name` gives)."""
    try:
        return uuid.UUID(hex=name.removeprefix(PREFIX))
    except ValueError:
        return None


async def try_lock(connection: AsyncConnection) -> bool:
    """Take the builders' lock for this connection's session, unless another holds it."""
    return bool(await connection.scalar(text("SELECT pg_try_advisory_lock(:k)"), {"k": _LOCK}))


async def unlock(connection: AsyncConnection) -> None:
    """Give the builders' lock back, and the session's build memory with it."""
    await connection.execute(text("RESET maintenance_work_mem"))
    await connection.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _LOCK})


async def indexes(connection: AsyncConnection) -> dict[str, bool]:
    """The tenant indexes there are, by name: valid (False: an interrupted build's)."""
    return {row.name: row.valid for row in await connection.execute(_INDEXES)}


async def tenant_sizes(connection: AsyncConnection) -> dict[uuid.UUID, tuple[int, int]]:
    """Each tenant's chunks, and all tenants' chunks."""
    rows = await connection.execute(_SIZES)
    return {row.tenant_id: (int(row.chunks), int(row.total)) for row in rows}


async def drop(connection: AsyncConnection, name: str) -> None:
    """Drop one tenant index without blocking readers or writers."""
    await connection.execute(text(f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"'))


async def build(connection: AsyncConnection, tenant_id: uuid.UUID, memory: str) -> str:
    """Build the tenant's index without blocking writers, with `memory` of
    maintenance_work_mem; its name."""
    await connection.execute(
        text("SELECT set_config('maintenance_work_mem', :m, false)"), {"m": memory}
    )
    name = index_name(tenant_id)
    # A UUID, formatted by Python: nothing to escape (DDL takes no parameters).
    await connection.execute(
        text(
            f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{name}" ON kb_chunks '
            "USING hnsw (embedding vector_cosine_ops) "
            f"WITH (m = 16, ef_construction = 64) WHERE tenant_id = '{tenant_id}'"
        )
    )
    return name
