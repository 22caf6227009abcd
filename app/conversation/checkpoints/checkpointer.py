"""The LangGraph checkpointer: `AsyncPostgresSaver` on a psycopg pool, under row-level security.

The checkpoint tables' policy admits a thread only if it is a session of the current tenant
(migration 0006). The saver's connections are pooled and in autocommit, so every use sets the
tenant on its connection first, from the turn being run (`CURRENT_TENANT`). Every use runs as
a pipeline: the setting travels with the use's first statement (no round trip of its own). The
pool serves this saver only, and every use sets the tenant first, so no use can inherit
another's, whatever an earlier use left behind.

Until the pipeline's sync its statements are one implicit transaction: a statement the server
refuses rolls back the whole use. (psycopg still syncs when Python leaves the block early, a
cancellation say, so what was queued until then commits — as in the library's own pipelined
write.) Pruning (at most `keep_checkpoints` per thread) rides in the same pipeline as the write
of the thread's new checkpoint: one round trip, one commit.

`setup()` is not used: the schema is Alembic's (migration 0006), and its concurrent index
builds could not run inside a pipeline's transaction anyway.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from contextvars import ContextVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
)
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.postgres.base import MIGRATIONS
from psycopg import AsyncConnection, AsyncCursor
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool
from sqlalchemy.ext.asyncio import AsyncSession

from app.conversation.checkpoints.repository import (
    PRUNE_THREAD,
    SET_TENANT,
    latest_checkpoint,
    prune_parameters,
    schema_version,
)

logger = logging.getLogger(__name__)
CURRENT_TENANT: ContextVar[str | None] = ContextVar("checkpoint_tenant", default=None)
TURN_READ: ContextVar[Callable[[], AbstractAsyncContextManager[AsyncSession]] | None] = ContextVar(
    "checkpoint_turn_read", default=None
)
"""The running turn's read transaction (set by the runner): where its checkpoint is read."""
# The thread whose old checkpoints go in the pipeline of the write now under way.
_PRUNE_AFTER_WRITE: ContextVar[tuple[str, str] | None] = ContextVar("prune", default=None)


class CheckpointSchemaError(RuntimeError):
    """The checkpoint tables are not at the version the installed library expects."""


class TenantScopedSaver(AsyncPostgresSaver):
    """`AsyncPostgresSaver` whose every database use runs in the current turn's tenant, and
    that keeps at most `keep_checkpoints` checkpoints per thread (0: all of them)."""

    keep_checkpoints: int = 0

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The thread's checkpoint; a run's read of its newest one goes in the turn's read
        transaction (`TURN_READ`, ADR 0070), not in a transaction of its own."""
        where = config["configurable"]
        shared = TURN_READ.get()
        if shared is None or get_checkpoint_id(config):
            return await super().aget_tuple(config)
        async with shared() as db:
            row = await latest_checkpoint(db, where["thread_id"], where.get("checkpoint_ns", ""))
        if row is None:
            return None
        if row["checkpoint"]["v"] < 4 and row["parent_checkpoint_id"]:
            return await super().aget_tuple(config)  # an old format: the library migrates it
        return await self._load_checkpoint_tuple(row)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint, then prune the thread's old ones in the same pipeline."""
        where = config["configurable"]
        target = (where["thread_id"], where.get("checkpoint_ns", ""))
        token = _PRUNE_AFTER_WRITE.set(target if self.keep_checkpoints > 0 else None)
        try:
            return await super().aput(config, checkpoint, metadata, new_versions)
        finally:
            _PRUNE_AFTER_WRITE.reset(token)

    @asynccontextmanager
    async def _cursor(self, *, pipeline: bool = False) -> AsyncIterator[AsyncCursor[DictRow]]:
        async with super()._cursor(pipeline=True) as cursor:
            await cursor.execute(SET_TENANT, (CURRENT_TENANT.get() or "",))
            yield cursor
            prune = _PRUNE_AFTER_WRITE.get()
            if prune is not None:
                _PRUNE_AFTER_WRITE.set(None)  # once, after the write's own statements
                await cursor.execute(
                    PRUNE_THREAD, prune_parameters(*prune, keep=self.keep_checkpoints)
                )


def create_pool(conninfo: str, max_size: int) -> AsyncConnectionPool[AsyncConnection[DictRow]]:
    """The checkpointer's psycopg pool (autocommit, dict rows), opened later by the caller."""
    return AsyncConnectionPool(
        conninfo,
        min_size=1,
        max_size=max_size,
        open=False,
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
    )


async def check_schema(
    pool: AsyncConnectionPool[AsyncConnection[DictRow]], wait_seconds: float = 3.0
) -> None:
    """Refuse to start against checkpoint tables of another library version."""
    found = await schema_version(pool, wait_seconds)
    expected = len(MIGRATIONS) - 1
    if found != expected:
        raise CheckpointSchemaError(
            f"checkpoint tables are at version {found}, langgraph-checkpoint-postgres expects "
            f"{expected}: run `threadline migrate` (or add a revision for the new library)"
        )
