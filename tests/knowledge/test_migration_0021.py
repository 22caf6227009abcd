"""Revision 0021: chunks stored before it are put in the BM25 inverted index; downgrade and
upgrade again work."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import create_async_engine

from app.config import Settings
from app.core import migrate
from tests.conftest import create_database, drop_database, make_settings


@pytest.fixture
async def database(pg_admin_url: URL, redis_url: str) -> AsyncIterator[Settings]:
    name = f"threadline_mig_{uuid.uuid4().hex[:10]}"
    url = await create_database(pg_admin_url, name)
    yield make_settings(url, redis_url)
    await drop_database(pg_admin_url, name)


async def _run(url: URL, sql: str, **params: object) -> list[tuple[object, ...]]:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as connection:
            result = await connection.execute(text(sql), params)
            return [tuple(row) for row in result] if result.returns_rows else []
    finally:
        await engine.dispose()


SEED = [
    "INSERT INTO tenants (id, name) VALUES (:t, 'acme')",
    "INSERT INTO kb_documents (tenant_id, id, title, content_hash, status) "
    "VALUES (:t, :doc, 'Night allowance', 'h1', 'ready')",
    "INSERT INTO kb_chunks (tenant_id, id, document_id, ordinal, text, token_count, title) "
    "VALUES (:t, gen_random_uuid(), :doc, 0, 'Night shifts are paid more at night.', 8, "
    "'Night allowance')",
]
POSTINGS = "SELECT lexeme, tf, title_tf, chunk_length FROM kb_term_postings ORDER BY lexeme"


async def test_existing_chunks_enter_the_index(database: Settings) -> None:
    owner = migrate.asyncpg_owner_url(database)
    await migrate.upgrade(database, owner, "0020")
    ids = {"t": uuid.uuid4(), "doc": uuid.uuid4()}
    for statement in SEED:
        await _run(owner, statement, **ids)

    await migrate.upgrade(database, owner, "0021")

    # "night": twice in the text, once in the title; four lexemes in the chunk.
    assert await _run(owner, POSTINGS) == [
        ("allow", 1, 1, 4),
        ("night", 3, 1, 4),
        ("paid", 1, 0, 4),
        ("shift", 1, 0, 4),
    ]
    await migrate.downgrade(database, owner, "0020")
    assert await _run(owner, "SELECT to_regclass('kb_term_postings')") == [(None,)]
    await migrate.upgrade(database, owner)
    assert len(await _run(owner, POSTINGS)) == 4
