"""Revision 0029: chunks get a `location`; chunks stored before it read with none, and
downgrade and upgrade again keep every chunk."""

from __future__ import annotations

import uuid

from app.config import Settings
from app.core import migrate
from tests.conftest import run_sql

SEED = [
    "INSERT INTO tenants (id, name) VALUES (:t, 'acme')",
    "INSERT INTO kb_documents (tenant_id, id, title, content_hash, status) "
    "VALUES (:t, :doc, 'Manual', 'h1', 'ready')",
    "INSERT INTO kb_chunks (tenant_id, id, document_id, ordinal, text, token_count, title) "
    "VALUES (:t, gen_random_uuid(), :doc, 0, 'Descale monthly.', 3, 'Manual')",
]
LOCATIONS = "SELECT ordinal, location FROM kb_chunks ORDER BY ordinal"


async def test_old_chunks_have_no_location_and_new_ones_keep_theirs(
    empty_database: Settings,
) -> None:
    owner = migrate.asyncpg_owner_url(empty_database)
    await migrate.upgrade(empty_database, owner, "0024")
    ids = {"t": uuid.uuid4(), "doc": uuid.uuid4()}
    for statement in SEED:
        await run_sql(owner, statement, **ids)

    await migrate.upgrade(empty_database, owner, "0029")
    assert await run_sql(owner, LOCATIONS) == [(0, None)]
    await run_sql(
        owner,
        "INSERT INTO kb_chunks (tenant_id, id, document_id, ordinal, text, token_count, title,"
        " location) VALUES (:t, gen_random_uuid(), :doc, 1, 'Page two.', 2, 'Manual',"
        " '{\"page\": 2}'::jsonb)",
        **ids,
    )
    assert await run_sql(owner, LOCATIONS) == [(0, None), (1, {"page": 2})]

    await migrate.downgrade(empty_database, owner, "0024")
    assert await run_sql(owner, "SELECT count(*) FROM kb_chunks") == [(2,)]
    await migrate.upgrade(empty_database, owner)
    assert await run_sql(owner, LOCATIONS) == [(0, None), (1, None)]
