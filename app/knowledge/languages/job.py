"""The language rebuild: a tenant's chunks re-analysed with its new language, in the
background (the in-process runner or a Celery worker), a batch per short transaction so
searches and chats go on meanwhile; progress is the share analysed with the tenant's
language (`app.knowledge.languages.service.describe`), read from the chunks themselves.

A job that dies leaves the rest to the next: setting the language again enqueues one, and
the job only ever moves chunks to the tenant's current language, so a duplicate, a late
job or a second switch during a rebuild is harmless.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.db import TENANT
from app.core.jobs import Job
from app.knowledge.languages.repository import index_progress, other_languages, reanalyse

logger = logging.getLogger(__name__)

REBUILD_LEXICAL_INDEX = "threadline.language.rebuild"
KINDS = ("kb", "attachment")
DEADLOCK_RETRIES = 3


def rebuild_job(tenant_id: uuid.UUID) -> Job:
    """The job that re-analyses a tenant's chunks with its language."""
    return Job(REBUILD_LEXICAL_INDEX, {"tenant_id": str(tenant_id)})


async def rebuild_lexical_index(
    sessionmaker: async_sessionmaker[AsyncSession], tenant_id: uuid.UUID, *, batch: int
) -> int:
    """Re-analyse every chunk of the tenant that follows its language, `batch` at a time;
    how many were. Bounded by the count found at the start (plus a margin for chunks an
    ingestion adds in the old language while it runs)."""
    async with sessionmaker() as db, db.begin():
        db.info[TENANT] = tenant_id
        progress = await index_progress(db, tenant_id)
    rounds = (progress.chunks - progress.analysed) // batch + 2 * len(KINDS) + 10
    done = 0
    for _ in range(rounds):
        changed = await _one_batch(sessionmaker, tenant_id, batch)
        done += changed
        if changed == 0:
            break
        await asyncio.sleep(0)  # the in-process runner shares the loop with the API
    logger.info("lexical index rebuilt", extra={"tenant": str(tenant_id), "chunks": done})
    return done


async def _one_batch(
    sessionmaker: async_sessionmaker[AsyncSession], tenant_id: uuid.UUID, batch: int
) -> int:
    """One transaction: up to `batch` chunks of the first kind that has any left."""
    for attempt in range(1, DEADLOCK_RETRIES + 1):
        try:
            async with sessionmaker() as db, db.begin():
                db.info[TENANT] = tenant_id
                others = await other_languages(db, tenant_id)
                if not others:
                    return 0
                for kind in KINDS:
                    changed = await reanalyse(db, tenant_id, kind, others, batch)
                    if changed:
                        return changed
                return 0
        except DBAPIError as exc:
            # An ingestion's statistics trigger and this batch's may still meet on shared
            # words in another order (the old lexemes and the new); PostgreSQL ends one.
            if "deadlock" not in str(exc.orig).lower() or attempt == DEADLOCK_RETRIES:
                raise
            await asyncio.sleep(0.05 * attempt)
    return 0


def language_handlers(
    sessionmaker: Callable[[], async_sessionmaker[AsyncSession]], batch: int
) -> dict[str, Callable[..., Awaitable[Any]]]:
    """The job runner's handler for the rebuild, by job name."""

    async def run(tenant_id: str) -> int:
        return await rebuild_lexical_index(sessionmaker(), uuid.UUID(tenant_id), batch=batch)

    return {REBUILD_LEXICAL_INDEX: run}
