"""Each large tenant's own HNSW index over its knowledge-base chunks (ADR 0095).

The shared HNSW index holds every tenant's chunks. A search filtered to one tenant walks it
past the other tenants' rows until enough of its own have passed the filter: the smaller the
tenant's share of the table, the longer the walk. Narrowed to one collection in ten, a tenant
holding 2.8 % of a million chunks was 18-27 ms by the shared index and 83-99 ms by an exact
scan of the collection; by an index of its own, 4.4-6.4 ms. A partial index (`WHERE tenant_id
= '…'`) is that: a graph of the tenant's chunks alone. The planner takes it for the tenant's
searches by itself (each is planned for its tenant, ADR 0094), and a collection filter then
only skips the tenant's other collections.

A tenant gets one when it holds at least `min_chunks` chunks and at most half of the table (a
tenant that is most of the table gains nothing from a second copy of the shared graph). It
is built CONCURRENTLY (writers go on) by the owner role, one at a time across processes (an
advisory lock), on a timer in the API process and by `threadline index-tenants`. An index an
interrupted build left invalid is dropped and built again; the index of a tenant that is gone,
or has shrunk below half the threshold, is dropped.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field

from sqlalchemy import URL
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.db import create_engine
from app.core.periodic import Periodic
from app.retrieval.tenant_indexes import repository
from app.retrieval.tenant_indexes.repository import index_name, tenant_of

logger = logging.getLogger(__name__)

MAX_SHARE = 0.5
"""A tenant holding more of the table than this gets no index of its own."""


@dataclass
class Changes:
    """What one pass built and dropped (index names)."""

    built: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)


async def plan(
    connection: AsyncConnection, min_chunks: int
) -> tuple[list[uuid.UUID], list[str], list[str]]:
    """The tenants whose index to build, the invalid indexes to build again (dropped first),
    and the indexes to drop."""
    existing = await repository.indexes(connection)
    sizes = await repository.tenant_sizes(connection)
    wanted = [
        tenant
        for tenant, (chunks, total) in sizes.items()
        if chunks >= min_chunks and chunks <= MAX_SHARE * total
    ]
    build = [tenant for tenant in wanted if existing.get(index_name(tenant)) is not True]
    rebuild = [index_name(t) for t in build if existing.get(index_name(t)) is False]
    drop = []
    for name in existing:
        tenant = tenant_of(name)
        chunks = sizes.get(tenant, (0, 0))[0] if tenant is not None else 0
        if chunks < min_chunks / 2:
            drop.append(name)
    return build, rebuild, drop


async def ensure(engine: AsyncEngine, min_chunks: int, build_memory: str) -> Changes:
    """Build the indexes large tenants lack and drop those no longer wanted; nothing when
    another process holds the builders' lock. `engine`: the owner role's."""
    changes = Changes()
    async with engine.connect() as connection:
        autocommit = await connection.execution_options(isolation_level="AUTOCOMMIT")
        if not await repository.try_lock(autocommit):
            return changes
        try:
            build, rebuild, drop = await plan(autocommit, min_chunks)
            for name in [*rebuild, *drop]:
                await repository.drop(autocommit, name)
            changes.dropped = drop
            for tenant in build:
                logger.info("building the HNSW index of tenant %s", tenant)
                changes.built.append(await repository.build(autocommit, tenant, build_memory))
        finally:
            await repository.unlock(autocommit)
    return changes


class TenantIndexScheduler:
    """Runs `ensure` every `seconds` in this process (the first pass one interval after the
    start: a restart never begins with an index build), on an owner-role engine of its own."""

    def __init__(self, owner_url: URL, seconds: float, min_chunks: int, build_memory: str) -> None:
        self.owner_url = owner_url
        self.min_chunks = min_chunks
        self.build_memory = build_memory
        self._timer = Periodic("tenant HNSW indexes", seconds, self._pass, at_start=False)

    def start(self) -> None:
        """Start the timer on the running event loop."""
        self._timer.start()

    async def _pass(self) -> None:
        engine = create_engine(self.owner_url, pool_size=1, max_overflow=0)
        try:
            changes = await ensure(engine, self.min_chunks, self.build_memory)
        finally:
            await engine.dispose()
        if changes.built or changes.dropped:
            logger.info("tenant HNSW indexes: built %s, dropped %s", changes.built, changes.dropped)

    async def stop(self) -> None:
        """Stop the timer; a build under way is cancelled (its invalid index is dropped and
        built again by a later pass)."""
        await self._timer.stop()
