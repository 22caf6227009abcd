"""The LangGraph checkpointer: `AsyncPostgresSaver` on a psycopg pool, under row-level security.

The checkpoint tables' policy admits a thread only if it is a session of the current tenant
(migration 0006). The saver's connections are pooled and in autocommit, so the tenant is a
session setting of the connection, made sure of at the start of every use from the turn being
run (`CURRENT_TENANT`). The pool serves this saver only, and every use checks the tenant first,
so no use can inherit another's. The saver remembers which tenant each connection was last
set to and skips the round trip when it is already the right one; a use that fails forgets
it, so a connection in doubt is set again.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.postgres.base import MIGRATIONS
from psycopg import AsyncConnection, AsyncCursor
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool

from app.graph.checkpoint_pruning import PRUNE_THREAD, prune_parameters

logger = logging.getLogger(__name__)
CURRENT_TENANT: ContextVar[str | None] = ContextVar("checkpoint_tenant", default=None)
_SET_TENANT = "SELECT set_config('threadline.tenant_id', %s, false)"


class CheckpointSchemaError(RuntimeError):
    pass


class TenantScopedSaver(AsyncPostgresSaver):
    """`AsyncPostgresSaver` whose every database use runs in the current turn's tenant, and
    that keeps at most `keep_checkpoints` checkpoints per thread (0: all of them)."""

    keep_checkpoints: int = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pruning: set[asyncio.Task[None]] = set()
        self._tenant_of: weakref.WeakKeyDictionary[AsyncConnection[Any], str] = (
            weakref.WeakKeyDictionary()
        )

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        stored = await super().aput(config, checkpoint, metadata, new_versions)
        if self.keep_checkpoints > 0:
            # Off the turn's path: the answer need not wait for old checkpoints to go. The task
            # copies this context, so it runs in the turn's tenant; a prune lost at shutdown is
            # redone by the thread's next write.
            where = stored["configurable"]
            task = asyncio.create_task(self._prune(where["thread_id"], where["checkpoint_ns"]))
            self._pruning.add(task)
            task.add_done_callback(self._pruning.discard)
        return stored

    async def _prune(self, thread_id: str, checkpoint_ns: str) -> None:
        try:
            async with self._cursor() as cursor:
                await cursor.execute(
                    PRUNE_THREAD, prune_parameters(thread_id, checkpoint_ns, self.keep_checkpoints)
                )
        except Exception:
            logger.warning("could not prune a thread's old checkpoints", exc_info=True)

    async def drain(self, wait_seconds: float = 5.0) -> None:
        """Wait (bounded) for pruning in flight: at shutdown, before the pool closes."""
        if self._pruning:
            await asyncio.wait(list(self._pruning), timeout=wait_seconds)

    @asynccontextmanager
    async def _cursor(self, *, pipeline: bool = False) -> AsyncIterator[AsyncCursor[DictRow]]:
        tenant = CURRENT_TENANT.get() or ""
        async with super()._cursor(pipeline=pipeline) as cursor:
            connection = cursor.connection
            if self._tenant_of.get(connection) != tenant:
                self._tenant_of.pop(connection, None)
                await cursor.execute(_SET_TENANT, (tenant,))
            try:
                yield cursor
            except BaseException:
                self._tenant_of.pop(connection, None)
                raise
            self._tenant_of[connection] = tenant


def create_pool(conninfo: str, max_size: int) -> AsyncConnectionPool[AsyncConnection[DictRow]]:
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
    async with pool.connection(timeout=wait_seconds) as connection:
        cursor = await connection.execute("SELECT max(v) AS v FROM checkpoint_migrations")
        row = await cursor.fetchone()
    expected = len(MIGRATIONS) - 1
    found = row["v"] if row else None
    if found != expected:
        raise CheckpointSchemaError(
            f"checkpoint tables are at version {found}, langgraph-checkpoint-postgres expects "
            f"{expected}: run `threadline migrate` (or add a revision for the new library)"
        )
