"""The background deletion of a collection: its documents (chunks, vectors and BM25 postings
cascade) in batches, each its own transaction, the progress recorded after each; then the
collection itself. Enqueued again by a repeated DELETE, it resumes where it stopped."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.collections.repository import CollectionRepository
from app.core.db import TENANT
from app.core.jobs import Job

logger = logging.getLogger(__name__)

DELETE_COLLECTION = "threadline.delete_collection"
BATCH_DOCUMENTS = 50
MAX_BATCHES = 100_000
"""A bound on the loop: far more documents than a collection holds."""


def delete_collection_job(tenant_id: uuid.UUID, collection_id: uuid.UUID) -> Job:
    """The job that empties and then removes one collection."""
    return Job(
        DELETE_COLLECTION, {"tenant_id": str(tenant_id), "collection_id": str(collection_id)}
    )


async def delete_collection(
    sessionmaker: async_sessionmaker[AsyncSession],
    tenant_id: uuid.UUID,
    collection_id: uuid.UUID,
    *,
    batch: int = BATCH_DOCUMENTS,
) -> int:
    """Delete the collection's documents batch by batch, then the collection (only if it is
    being deleted); how many documents were deleted."""
    # No `threadline.collections` here: the job sees every collection of the tenant,
    # including this one, which requests no longer see (its status is `deleting`).
    deleted = 0
    total = None
    for _ in range(MAX_BATCHES):
        async with sessionmaker() as db:
            db.info[TENANT] = tenant_id
            async with db.begin():
                collections = CollectionRepository(db, tenant_id)
                collection = await collections.get(collection_id)
                if collection is None or collection.status != "deleting":
                    return deleted
                if total is None:
                    total = deleted + await collections.count_documents(collection_id)
                removed = await collections.delete_documents(collection_id, batch)
                deleted += removed
                if removed == 0:
                    await collections.delete(collection)
                    return deleted
                await collections.set_progress(collection_id, min(deleted / max(total, 1), 0.99))
    logger.error(
        "collection deletion stopped at its bound", extra={"collection": str(collection_id)}
    )
    return deleted


def collection_handlers(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> dict[str, Callable[..., Awaitable[Any]]]:
    """The job runner's handler for collection deletions, by job name."""

    async def run(tenant_id: str, collection_id: str) -> int:
        return await delete_collection(sessionmaker, uuid.UUID(tenant_id), uuid.UUID(collection_id))

    return {DELETE_COLLECTION: run}
