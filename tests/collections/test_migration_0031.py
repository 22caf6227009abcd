"""Revision 0031 on a database with data: every tenant gets a default collection, visible to
all, and every existing document and chunk moves into it; downgrade keeps the documents and
chunks and drops groups and collections; upgrade works again."""

from __future__ import annotations

import uuid

from app.config import Settings
from app.core import migrate
from tests.conftest import run_sql

SEED = [
    "INSERT INTO tenants (id, name) VALUES (:t, 'acme'), (:e, 'empty')",
    "INSERT INTO users (tenant_id, id, email, password_hash, role) "
    "VALUES (:t, :u, 'a@example.com', 'x', 'member')",
    "INSERT INTO kb_documents (tenant_id, id, title, content_hash, status) "
    "VALUES (:t, :d1, 'Handbook', 'h1', 'ready'), (:t, :d2, 'Minutes', 'h2', 'ready')",
    "INSERT INTO kb_chunks (tenant_id, id, document_id, ordinal, text, token_count) "
    "VALUES (:t, gen_random_uuid(), :d1, 0, 'Holidays are 25 days.', 4), "
    "(:t, gen_random_uuid(), :d1, 1, 'Sick leave is paid.', 4), "
    "(:t, gen_random_uuid(), :d2, 0, 'The board met.', 3)",
]


async def test_existing_documents_move_to_a_default_collection_and_back(
    empty_database: Settings,
) -> None:
    owner = migrate.asyncpg_owner_url(empty_database)
    await migrate.upgrade(empty_database, owner, "0024")
    ids = {k: uuid.uuid4() for k in ("t", "e", "u", "d1", "d2")}
    for statement in SEED:
        await run_sql(owner, statement, **ids)

    await migrate.upgrade(empty_database, owner, "0031")

    defaults = await run_sql(
        owner,
        "SELECT tenant_id, name, visibility FROM kb_collections WHERE is_default "
        "ORDER BY tenant_id = :t",
        **ids,
    )
    assert defaults == [(ids["e"], "General", "tenant"), (ids["t"], "General", "tenant")]
    (default,) = await run_sql(owner, "SELECT id FROM kb_collections WHERE tenant_id = :t", **ids)
    assert await run_sql(
        owner, "SELECT count(*) FROM kb_documents WHERE collection_id = :c", c=default[0]
    ) == [(2,)]
    assert await run_sql(
        owner, "SELECT count(*) FROM kb_chunks WHERE collection_id = :c", c=default[0]
    ) == [(3,)]
    # A group, a scoped collection and a moved document, then down again.
    await run_sql(
        owner,
        "INSERT INTO groups (tenant_id, id, name) VALUES (:t, :g, 'b')",
        g=ids["u"],
        t=ids["t"],
    )
    await run_sql(
        owner,
        "INSERT INTO group_members (tenant_id, group_id, user_id) VALUES (:t, :g, :g)",
        t=ids["t"],
        g=ids["u"],
    )
    await run_sql(
        owner,
        "INSERT INTO kb_collections (tenant_id, id, name, visibility) "
        "VALUES (:t, :c, 'Board', 'groups')",
        t=ids["t"],
        c=ids["d2"],
    )
    await run_sql(owner, "UPDATE kb_documents SET collection_id = :c WHERE id = :c", c=ids["d2"])
    assert await run_sql(
        owner, "SELECT count(*) FROM kb_chunks WHERE collection_id = :c", c=ids["d2"]
    ) == [(1,)]

    await migrate.downgrade(empty_database, owner, "0024")

    assert await run_sql(owner, "SELECT count(*) FROM kb_documents") == [(2,)]
    assert await run_sql(owner, "SELECT count(*) FROM kb_chunks") == [(3,)]
    assert await run_sql(owner, "SELECT to_regclass('kb_collections')") == [(None,)]
    assert await run_sql(
        owner,
        "SELECT count(*) FROM information_schema.columns WHERE column_name = 'collection_id'",
    ) == [(0,)]

    await migrate.upgrade(empty_database, owner)
    assert await run_sql(owner, "SELECT count(*) FROM kb_chunks WHERE collection_id IS NULL") == [
        (0,)
    ]
