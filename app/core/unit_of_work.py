"""The unit of work's one door: a short transaction scoped to a tenant (ADR 0070).

Services that own their transactions (the chat service, `/v1`, MCP's tools, durability) are
handed a `Transactions` when they are built; none reaches into another component for one.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.db import COLLECTIONS, TENANT, collections_literal
from app.core.jobs import RUNNER, JobRunner


@dataclass(frozen=True)
class Transactions:
    """Tenant-scoped transactions on one session factory; jobs enqueued in one run after
    its commit."""

    sessionmaker: async_sessionmaker[AsyncSession]
    jobs: JobRunner | None = None

    @asynccontextmanager
    async def __call__(
        self, tenant_id: str | uuid.UUID, narrowed_to: Sequence[uuid.UUID] | None = None
    ) -> AsyncIterator[AsyncSession]:
        """A database session scoped to the tenant, committed when the block ends without
        error; narrowed to these knowledge-base collections when given (ADR 0078), by the
        setting every transaction begins with (no statement of its own)."""
        async with self.sessionmaker() as db:
            db.info[TENANT] = tenant_id
            if narrowed_to is not None:
                db.info[COLLECTIONS] = collections_literal(narrowed_to)
            if self.jobs is not None:
                db.info[RUNNER] = self.jobs  # jobs enqueued here run after the commit
            async with db.begin():
                yield db

    @asynccontextmanager
    async def continuing(
        self, tenant_id: uuid.UUID, begun: AsyncSession | None, *, end: bool = True
    ) -> AsyncIterator[AsyncSession]:
        """A transaction of its own; or `begun`, a transaction the caller's request already
        began (authentication's), continued — and committed when `end`, which releases its
        connection. A failure rolls it back."""
        if begun is None:
            async with self(tenant_id) as db:
                yield db
            return
        try:
            yield begun
        except BaseException:
            await begun.rollback()
            raise
        if end:
            await begun.commit()


async def release(begun: AsyncSession | None) -> None:
    """End a begun transaction that only read (its connection goes back to the pool)."""
    if begun is not None:
        await begun.rollback()
