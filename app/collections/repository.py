"""Every statement on `kb_collections` and `kb_collection_groups`, and the moves and
batched deletions of documents between collections (a session's scope: `app.access`)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import delete, func, select, update
from sqlalchemy.dialects.postgresql import insert

from app.core.repository import TenantRepository
from app.models import KbChunk, KbCollection, KbCollectionGroup, KbDocument


@dataclass(frozen=True)
class CollectionStats:
    """A collection's documents: how many, their bytes and chunks."""

    documents: int = 0
    size_bytes: int = 0
    chunks: int = 0


class CollectionRepository(TenantRepository[KbCollection]):
    """A tenant's collections, their groups and their documents."""

    model = KbCollection

    async def all(self, ids: Sequence[uuid.UUID] | None = None) -> list[KbCollection]:
        """The tenant's collections by name (only `ids` when given)."""
        statement = self.scoped().order_by(KbCollection.name)
        if ids is not None:
            statement = statement.where(KbCollection.id.in_(list(ids)))
        return list(await self.db.scalars(statement))

    async def default(self) -> KbCollection | None:
        """The tenant's default collection, if it has one yet."""
        return await self.db.scalar(self.scoped().where(KbCollection.is_default))

    async def ensure_default(self) -> None:
        """Create the tenant's default collection (visible to everyone) if it is missing."""
        await self.db.execute(
            insert(KbCollection)
            .values(tenant_id=self.tenant_id, id=uuid.uuid4(), name="General", is_default=True)
            .on_conflict_do_nothing()
        )

    async def by_name(self, name: str) -> KbCollection | None:
        """The tenant's collection of this name, or None."""
        return await self.db.scalar(self.scoped().where(KbCollection.name == name))

    async def stats(self) -> dict[uuid.UUID, CollectionStats]:
        """Each collection's document count, bytes and chunks (those the caller sees)."""
        documents = await self.db.execute(
            select(
                KbDocument.collection_id,
                func.count(),
                func.coalesce(func.sum(KbDocument.size_bytes), 0),
            )
            .where(KbDocument.tenant_id == self.tenant_id)
            .group_by(KbDocument.collection_id)
        )
        chunks = dict(
            (
                await self.db.execute(
                    select(KbChunk.collection_id, func.count())
                    .where(KbChunk.tenant_id == self.tenant_id)
                    .group_by(KbChunk.collection_id)
                )
            ).all()
        )
        return {
            cid: CollectionStats(int(n), int(size), int(chunks.get(cid, 0)))
            for cid, n, size in documents.all()
        }

    async def group_ids(
        self, collection_ids: Sequence[uuid.UUID]
    ) -> dict[uuid.UUID, list[uuid.UUID]]:
        """The groups each of these collections is visible to."""
        rows = await self.db.execute(
            select(KbCollectionGroup.collection_id, KbCollectionGroup.group_id)
            .where(
                KbCollectionGroup.tenant_id == self.tenant_id,
                KbCollectionGroup.collection_id.in_(list(collection_ids)),
            )
            .order_by(KbCollectionGroup.group_id)
        )
        found: dict[uuid.UUID, list[uuid.UUID]] = {}
        for collection_id, group_id in rows.all():
            found.setdefault(collection_id, []).append(group_id)
        return found

    async def set_groups(self, collection_id: uuid.UUID, group_ids: Sequence[uuid.UUID]) -> None:
        """Make `group_ids` exactly the groups the collection is visible to."""
        await self.db.execute(
            delete(KbCollectionGroup).where(
                KbCollectionGroup.tenant_id == self.tenant_id,
                KbCollectionGroup.collection_id == collection_id,
            )
        )
        if group_ids:
            await self.db.execute(
                insert(KbCollectionGroup),
                [
                    {"tenant_id": self.tenant_id, "collection_id": collection_id, "group_id": g}
                    for g in dict.fromkeys(group_ids)
                ],
            )

    async def move_document(
        self, document_id: uuid.UUID, collection_id: uuid.UUID
    ) -> uuid.UUID | None:
        """Move a document (its chunks follow, by trigger); its previous collection, or None
        when the caller sees no such document."""
        before = await self.db.scalar(
            select(KbDocument.collection_id).where(
                KbDocument.tenant_id == self.tenant_id, KbDocument.id == document_id
            )
        )
        if before is None:
            return None
        await self.db.execute(
            update(KbDocument)
            .where(KbDocument.tenant_id == self.tenant_id, KbDocument.id == document_id)
            .values(collection_id=collection_id)
        )
        return before

    async def delete_documents(self, collection_id: uuid.UUID, batch: int) -> int:
        """Delete up to `batch` of a collection's documents (chunks and vectors cascade);
        how many were deleted."""
        ids = (
            select(KbDocument.id)
            .where(
                KbDocument.tenant_id == self.tenant_id, KbDocument.collection_id == collection_id
            )
            .limit(batch)
            .scalar_subquery()
        )
        result = await self.db.execute(
            delete(KbDocument)
            .where(KbDocument.tenant_id == self.tenant_id, KbDocument.id.in_(ids))
            .returning(KbDocument.id)
        )
        return len(result.scalars().all())

    async def count_documents(self, collection_id: uuid.UUID) -> int:
        """How many documents a collection holds."""
        return int(
            await self.db.scalar(
                select(func.count()).where(
                    KbDocument.tenant_id == self.tenant_id,
                    KbDocument.collection_id == collection_id,
                )
            )
            or 0
        )

    async def set_progress(self, collection_id: uuid.UUID, progress: float) -> None:
        """Record how far a collection's deletion has gone (0 to 1)."""
        await self.db.execute(
            update(KbCollection)
            .where(KbCollection.tenant_id == self.tenant_id, KbCollection.id == collection_id)
            .values(deletion_progress=progress)
        )
