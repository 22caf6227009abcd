"""Re-embed every stored vector with the configured embedder, then switch to them at once
(`threadline reindex`, docs/operations.md).

The new vectors go into a shadow column (`embedding_next`, of the new model's dimension) of
each table holding vectors — the chunks of documents and attachments (with their titles) and
the FAQ questions — while search and ingestion go on with the old column and the old model.
Once every row has a new vector, its HNSW index is built without blocking writers; then one
transaction holds off writers, embeds the rows added meanwhile, drops the old column, renames
the shadow one and records the new model. A run that stops part-way is resumed by the next
(rows already re-embedded are kept when the model is the same).

It runs as the owner role (DDL), tenant by tenant inside each tenant's RLS scope. Servers
still running with the old embedder see the recorded model change: their searches fall back
to the lexical leg and their ingestions fail rather than mix the two spaces, until they are
restarted with the new `THREADLINE_EMBEDDER`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.core.db import TENANT, set_scope
from app.embeddings import repository
from app.embeddings.base import Embedder, document_input

BATCH = 64


@dataclass
class Reindex:
    """One re-embedding of the database into `embedder`'s space, in steps."""

    sessions: async_sessionmaker[AsyncSession]
    """Owner-role sessions."""
    engine: AsyncEngine
    """The owner-role engine (the indexes are built outside a transaction)."""
    embedder: Embedder
    advance: Callable[[int], None] = lambda _done: None
    """Called with the number of rows each batch re-embedded."""
    resumed: bool = False

    async def start(self) -> tuple[int, int]:
        """Make (or keep, to resume) the shadow columns: the rows in all, and those already
        re-embedded."""
        async with self.sessions() as db, db.begin():
            self.resumed = await repository.start_shadow(
                db, self.embedder.name, self.embedder.dimension
            )
        total = pending = 0
        for tenant in await self._tenants():
            async with self.sessions() as db, db.begin():
                await set_scope(db, {TENANT: tenant})
                for table in repository.EMBEDDED_TABLES:
                    total += await repository.count_rows(db, table, pending=False)
                    pending += await repository.count_rows(db, table, pending=True)
        return total, total - pending

    async def fill(self, max_batches: int | None = None) -> int:
        """Re-embed rows still without a new vector, one transaction per batch (at most
        `max_batches` of them), walking each tenant's rows by id; the rows re-embedded."""
        done, batches = 0, 0
        for tenant in await self._tenants():
            for table in repository.EMBEDDED_TABLES:
                after = None
                while max_batches is None or batches < max_batches:
                    async with self.sessions() as db, db.begin():
                        await set_scope(db, {TENANT: tenant})
                        written, after = await self._embed_batch(db, table, after)
                    if not written:
                        break
                    done, batches = done + written, batches + 1
        return done

    async def finish(self) -> None:
        """Build the new indexes, embed what was added meanwhile and switch, atomically."""
        await repository.build_shadow_indexes(self.engine)
        async with self.sessions() as db, db.begin():
            await repository.lock_writers(db)
            for tenant in await repository.tenant_ids(db):
                await set_scope(db, {TENANT: tenant})
                for table in repository.EMBEDDED_TABLES:
                    # What was added meanwhile (ids in no order): until none is left.
                    while (await self._embed_batch(db, table, None))[0]:
                        pass
            await repository.switch_to_shadow(db, self.embedder.name, self.embedder.dimension)

    async def _tenants(self) -> list[uuid.UUID]:
        async with self.sessions() as db, db.begin():
            return await repository.tenant_ids(db)

    async def _embed_batch(self, db: AsyncSession, table: str, after: Any) -> tuple[int, Any]:
        """Re-embed the next batch after id `after` (None: the first ones still missing):
        how many rows, and the last id."""
        rows = await repository.pending_rows(db, table, BATCH, after)
        if not rows:
            return 0, after
        vectors = await self.embedder.embed(
            [document_input(title, body) for _, title, body in rows]
        )
        await repository.write_shadow(db, table, [row[0] for row in rows], vectors)
        self.advance(len(rows))
        return len(rows), rows[-1][0]
