"""Revision 0021: chunks stored before it are put in the BM25 inverted index; downgrade and
upgrade again work."""

from __future__ import annotations

import uuid

from app.config import Settings
from app.core import migrate
from tests.conftest import run_sql

SEED = [
    "INSERT INTO tenants (id, name) VALUES (:t, 'acme')",
    "INSERT INTO kb_documents (tenant_id, id, title, content_hash, status) "
    "VALUES (:t, :doc, 'Night allowance', 'h1', 'ready')",
    "INSERT INTO kb_chunks (tenant_id, id, document_id, ordinal, text, token_count, title) "
    "VALUES (:t, gen_random_uuid(), :doc, 0, 'Night shifts are paid more at night.', 8, "
    "'Night allowance')",
]
POSTINGS = "SELECT lexeme, tf, title_tf, chunk_length FROM kb_term_postings ORDER BY lexeme"


async def test_existing_chunks_enter_the_index(empty_database: Settings) -> None:
    owner = migrate.asyncpg_owner_url(empty_database)
    await migrate.upgrade(empty_database, owner, "0020")
    ids = {"t": uuid.uuid4(), "doc": uuid.uuid4()}
    for statement in SEED:
        await run_sql(owner, statement, **ids)

    await migrate.upgrade(empty_database, owner, "0021")

    # "night": twice in the text, once in the title; four lexemes in the chunk.
    assert await run_sql(owner, POSTINGS) == [
        ("allow", 1, 1, 4),
        ("night", 3, 1, 4),
        ("paid", 1, 0, 4),
        ("shift", 1, 0, 4),
    ]
    await migrate.downgrade(empty_database, owner, "0020")
    assert await run_sql(owner, "SELECT to_regclass('kb_term_postings')") == [(None,)]
    await migrate.upgrade(empty_database, owner)
    assert len(await run_sql(owner, POSTINGS)) == 4
