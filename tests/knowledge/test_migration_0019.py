"""Revision 0019: chunks stored before it get their parent's title and a full-text vector
that weighs it ('A' over the text's 'B'); the BM25 statistics are recounted; downgrade and
upgrade again work."""

from __future__ import annotations

import uuid

from app.config import Settings
from app.core import migrate
from tests.conftest import run_sql

SEED = [
    "INSERT INTO tenants (id, name) VALUES (:t, 'acme')",
    "INSERT INTO users (tenant_id, id, email, password_hash, role) "
    "VALUES (:t, :u, 'a@example.com', 'x', 'admin')",
    "INSERT INTO kb_documents (tenant_id, id, title, content_hash, status) "
    "VALUES (:t, :doc, 'Zephyrine allowance', 'h1', 'ready')",
    "INSERT INTO kb_chunks (tenant_id, id, document_id, ordinal, text, token_count) "
    "VALUES (:t, gen_random_uuid(), :doc, 0, 'Night shifts are paid more.', 6)",
    "INSERT INTO attachments (tenant_id, id, user_id, filename, content_hash, status) "
    "VALUES (:t, :att, :u, 'quarterly-rota_v2.txt', 'h2', 'ready')",
    "INSERT INTO attachment_chunks (tenant_id, id, attachment_id, ordinal, text, token_count) "
    "VALUES (:t, gen_random_uuid(), :att, 0, 'Shifts start at ten.', 5)",
]


async def test_existing_chunks_are_reindexed_with_their_titles(empty_database: Settings) -> None:
    owner = migrate.asyncpg_owner_url(empty_database)
    await migrate.upgrade(empty_database, owner, "0018")
    ids = {"t": uuid.uuid4(), "u": uuid.uuid4(), "doc": uuid.uuid4(), "att": uuid.uuid4()}
    for statement in SEED:
        await run_sql(owner, statement, **ids)
    matches = "SELECT count(*) FROM {} WHERE tsv @@ to_tsquery('english', :word)"
    assert await run_sql(owner, matches.format("kb_chunks"), word="zephyrine") == [(0,)]

    await migrate.upgrade(empty_database, owner, "0019")

    assert await run_sql(owner, "SELECT title FROM kb_chunks") == [("Zephyrine allowance",)]
    assert await run_sql(owner, "SELECT title FROM attachment_chunks") == [
        ("quarterly rota v2 txt",)
    ]
    assert await run_sql(owner, matches.format("kb_chunks"), word="zephyrine") == [(1,)]
    assert await run_sql(owner, matches.format("attachment_chunks"), word="quarterly") == [(1,)]
    weights = await run_sql(
        owner,
        "SELECT u.lexeme, u.weights FROM kb_chunks, unnest(tsv) AS u "
        "WHERE u.lexeme IN ('zephyrin', 'night')",
    )
    assert sorted(weights) == [("night", ["B"]), ("zephyrin", ["A"])]
    # The BM25 statistics count the title's words now.
    assert await run_sql(
        owner, "SELECT df FROM kb_term_stats WHERE lexeme = 'zephyrin' AND tenant_id = :t", **ids
    ) == [(1,)]
    (length,) = await run_sql(owner, "SELECT total_length FROM kb_corpus_stats")
    assert length == (5,)  # zephyrin, allow (title); night, shift, paid (text): 3 before

    await migrate.downgrade(empty_database, owner, "0018")
    assert await run_sql(owner, matches.format("kb_chunks"), word="zephyrine") == [(0,)]
    await migrate.upgrade(empty_database, owner)
    assert await run_sql(owner, matches.format("kb_chunks"), word="zephyrine") == [(1,)]
