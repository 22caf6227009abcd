"""Revision 0030: chunks stored before it keep their (english) vectors and postings, say so,
and go down again with data, Dutch ones included (the lexicon recounted as English)."""

from __future__ import annotations

import uuid

from app.config import Settings
from app.core import migrate
from tests.conftest import run_sql

SEED = [
    "INSERT INTO tenants (id, name) VALUES (:t, 'gemeente')",
    "INSERT INTO kb_documents (tenant_id, id, title, content_hash, status) "
    "VALUES (:t, :doc, 'Verkeer', 'h1', 'ready')",
    "INSERT INTO kb_chunks (tenant_id, id, document_id, ordinal, text, token_count, title) "
    "VALUES (:t, gen_random_uuid(), :doc, 0, 'Nieuwe fietspaden langs de rivier.', 5, "
    "'Verkeer')",
]
POSTINGS = "SELECT lexeme FROM kb_term_postings ORDER BY lexeme"
STATS = "SELECT lexeme, df FROM kb_term_stats ORDER BY lexeme"


async def test_existing_chunks_stay_english_and_go_down_with_data(
    empty_database: Settings,
) -> None:
    owner = migrate.asyncpg_owner_url(empty_database)
    await migrate.upgrade(empty_database, owner, "0024")
    ids = {"t": uuid.uuid4(), "doc": uuid.uuid4()}
    for statement in SEED:
        await run_sql(owner, statement, **ids)
    english = await run_sql(owner, POSTINGS)
    assert ("fietspaden",) in english

    await migrate.upgrade(empty_database, owner, "0030")
    assert await run_sql(owner, "SELECT language::text FROM kb_chunks") == [("english",)]
    assert await run_sql(owner, POSTINGS) == english

    # The tenant turns Dutch and its chunk is re-analysed, as the rebuild does it.
    await run_sql(owner, 'UPDATE tenants SET settings = \'{"language": "dutch"}\'')
    await run_sql(owner, "UPDATE kb_chunks SET language = tenant_text_config(tenant_id)")
    dutch = await run_sql(owner, POSTINGS)
    assert ("fietspad",) in dutch and ("fietspaden",) not in dutch
    assert ("fietspad", 1) in await run_sql(owner, STATS)

    await migrate.downgrade(empty_database, owner, "0024")
    assert await run_sql(owner, POSTINGS) == english  # recounted from English vectors
    assert ("fietspaden", 1) in await run_sql(owner, STATS)
    await migrate.upgrade(empty_database, owner)
    assert await run_sql(owner, POSTINGS) == english
