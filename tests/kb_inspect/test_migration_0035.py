"""Revision 0035: documents stored before it start their history with the status they are
in; the table goes down and comes up again with data, under forced row-level security."""

from __future__ import annotations

import uuid

from app.config import Settings
from app.core import migrate
from tests.conftest import run_sql

SEED = [
    "INSERT INTO tenants (id, name) VALUES (:t, 'acme')",
    "INSERT INTO kb_documents (tenant_id, id, title, content_hash, status, chunk_count) "
    "VALUES (:t, :ready, 'Handbook', 'h1', 'ready', 1)",
    "INSERT INTO kb_documents (tenant_id, id, title, content_hash, status, error) "
    "VALUES (:t, :failed, 'Broken', 'h2', 'failed', 'The file is missing.')",
]
EVENTS = "SELECT document_id, status, detail FROM kb_document_events ORDER BY status"
FORCED = (
    "SELECT relname FROM pg_class WHERE relforcerowsecurity AND relname = ANY(:t) ORDER BY relname"
)


async def test_existing_documents_start_their_history_and_it_goes_down_and_up_with_data(
    empty_database: Settings,
) -> None:
    owner = migrate.asyncpg_owner_url(empty_database)
    await migrate.upgrade(empty_database, owner, "0034")
    ids = {"t": uuid.uuid4(), "ready": uuid.uuid4(), "failed": uuid.uuid4()}
    for statement in SEED:
        await run_sql(owner, statement, **ids)

    expected = [
        (ids["failed"], "failed", "The file is missing."),
        (ids["ready"], "ready", "1 chunk"),
    ]
    await migrate.upgrade(empty_database, owner, "0035")
    assert await run_sql(owner, EVENTS) == expected
    tables = ["kb_documents", "kb_document_events"]
    assert await run_sql(owner, FORCED, t=tables) == [(name,) for name in sorted(tables)]

    await migrate.downgrade(empty_database, owner, "0034")
    assert await run_sql(owner, "SELECT to_regclass('kb_document_events')") == [(None,)]
    assert len(await run_sql(owner, "SELECT id FROM kb_documents")) == 2

    await migrate.upgrade(empty_database, owner, "0035")
    assert await run_sql(owner, EVENTS) == expected
    # A document's events go with it.
    await run_sql(owner, "DELETE FROM kb_documents WHERE id = :d", d=ids["ready"])
    assert await run_sql(owner, EVENTS) == expected[:1]
