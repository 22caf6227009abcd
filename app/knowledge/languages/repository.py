"""SQL for a tenant's text-search language: PostgreSQL's configurations, and the chunks
that follow the tenant's language (those of documents without their own) and how many of
them are analysed with it yet (migration 0030)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import CursorResult, text
from sqlalchemy.ext.asyncio import AsyncSession

# The built-in configurations (english, dutch, simple…): the names a tenant or a document
# may choose; a configuration someone created in another schema is not offered.
_CONFIGURATIONS = text(
    "SELECT cfgname FROM pg_ts_config "
    "WHERE cfgnamespace = 'pg_catalog'::regnamespace ORDER BY cfgname"
)

_TENANT_CONFIG = text("SELECT tenant_text_config(:tenant)::text")

# The chunks that follow the tenant's language, and those analysed with it: the knowledge
# base's (of documents without their own language) and the attachments'.
_PROGRESS = text(
    """
    WITH target AS (SELECT tenant_text_config(:tenant) AS config)
    SELECT (SELECT config::text FROM target) AS language,
           count(*) AS chunks,
           count(*) FILTER (WHERE f.language = (SELECT config FROM target)) AS analysed
    FROM (
      SELECT c.language FROM kb_chunks c
      JOIN kb_documents d ON d.tenant_id = c.tenant_id AND d.id = c.document_id
      WHERE c.tenant_id = :tenant AND d.language IS NULL
      UNION ALL
      SELECT a.language FROM attachment_chunks a WHERE a.tenant_id = :tenant
    ) AS f
    """
)

# One batch of chunks re-analysed with the tenant's language (read in the statement: a
# switch during a rebuild redirects the rest of it). Setting `language` recomputes `tsv`;
# the UPDATE trigger keeps the BM25 statistics and postings in step. A chunk an ingestion
# is replacing right now is waited for (not skipped: the rebuild ends when none is left).
# The batch is chosen once, in a materialized CTE: as `id IN (subquery)` the planner could
# run the subquery again for each row, whose lock skipped the rows this statement had just
# updated and took the next ones, so one "batch" went on through the tenant's chunks (4 of
# 8 with a batch of 2, then waited on a row another transaction held).
_REANALYSE = {
    "kb": text(
        """
        WITH batch AS MATERIALIZED (
          SELECT c2.id FROM kb_chunks c2
          JOIN kb_documents d ON d.tenant_id = c2.tenant_id AND d.id = c2.document_id
          WHERE c2.tenant_id = :tenant AND d.language IS NULL
            AND c2.language = ANY(CAST(:others AS regconfig[]))
          ORDER BY c2.id
          LIMIT :batch
          FOR UPDATE OF c2)
        UPDATE kb_chunks c SET language = tenant_text_config(:tenant)
        FROM batch WHERE c.tenant_id = :tenant AND c.id = batch.id
        """
    ),
    "attachment": text(
        """
        WITH batch AS MATERIALIZED (
          SELECT a.id FROM attachment_chunks a
          WHERE a.tenant_id = :tenant AND a.language = ANY(CAST(:others AS regconfig[]))
          ORDER BY a.id
          LIMIT :batch
          FOR UPDATE)
        UPDATE attachment_chunks c SET language = tenant_text_config(:tenant)
        FROM batch WHERE c.tenant_id = :tenant AND c.id = batch.id
        """
    ),
}

# The configurations the tenant's chunks are in other than its own (the skip scan of the
# search's, app.retrieval.repository, over both tables).
_OTHER_LANGUAGES = text(
    """
    SELECT coalesce(array_agg(DISTINCT language::text), '{}') FROM (
      SELECT language FROM kb_chunks WHERE tenant_id = :tenant
      UNION
      SELECT language FROM attachment_chunks WHERE tenant_id = :tenant
    ) AS l
    WHERE language <> tenant_text_config(:tenant)
    """
)


@dataclass(frozen=True)
class IndexProgress:
    """How far the tenant's chunks are analysed with its language."""

    language: str
    chunks: int
    analysed: int


async def configurations(db: AsyncSession) -> list[str]:
    """PostgreSQL's built-in text-search configurations, by name."""
    return list((await db.scalars(_CONFIGURATIONS)).all())


async def tenant_language(db: AsyncSession, tenant_id: uuid.UUID) -> str:
    """The configuration the tenant's new chunks get (english unless it chose another)."""
    return str(await db.scalar(_TENANT_CONFIG, {"tenant": tenant_id}))


async def index_progress(db: AsyncSession, tenant_id: uuid.UUID) -> IndexProgress:
    """The tenant's chunks that follow its language, and how many are analysed with it."""
    row = (await db.execute(_PROGRESS, {"tenant": tenant_id})).one()
    return IndexProgress(str(row.language), int(row.chunks), int(row.analysed))


async def other_languages(db: AsyncSession, tenant_id: uuid.UUID) -> list[str]:
    """The configurations of the tenant's chunks other than its own language."""
    return list(await db.scalar(_OTHER_LANGUAGES, {"tenant": tenant_id}) or [])


async def reanalyse(
    db: AsyncSession, tenant_id: uuid.UUID, kind: str, others: Sequence[str], batch: int
) -> int:
    """Re-analyse up to `batch` chunks of `kind` in another configuration than the tenant's
    (and not of a document with its own); how many were."""
    result = await db.execute(
        _REANALYSE[kind], {"tenant": tenant_id, "others": list(others), "batch": batch}
    )
    return int(cast(CursorResult[Any], result).rowcount)
