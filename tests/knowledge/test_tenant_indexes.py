"""A large tenant gets an HNSW index of its own, which the planner takes for its searches
(issue 30, item 3; ADR 0095): built for a tenant past the threshold that holds at most half
of the chunks, built again when a build was interrupted, dropped when the tenant is gone,
and built by one process at a time."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from app.core import migrate
from app.core.database_urls import resolve_database_urls
from app.core.db import create_engine
from app.embeddings.hashing import HashingEmbedder
from app.retrieval.repository import KB, _nearest_statement
from app.retrieval.tenant_indexes.maintenance import ensure
from app.retrieval.tenant_indexes.repository import PREFIX, index_name

MIN_CHUNKS = 5


@pytest.fixture
async def owner(empty_database: Settings) -> AsyncIterator[AsyncEngine]:
    urls = resolve_database_urls(empty_database)
    await migrate.upgrade(empty_database, urls.owner)
    engine = create_engine(urls.owner, pool_size=3, max_overflow=0)
    yield engine
    await engine.dispose()


async def _tenant_with_chunks(owner: AsyncEngine, chunks: int) -> uuid.UUID:
    """A tenant with one document of `chunks` chunks (its default collection)."""
    tenant, document = uuid.uuid4(), uuid.uuid4()
    vectors = await HashingEmbedder().embed([f"passage {n} of {tenant}" for n in range(chunks)])
    async with owner.begin() as connection:
        await connection.execute(
            text("INSERT INTO tenants (id, name) VALUES (:t, :n)"),
            {"t": tenant, "n": f"t-{tenant.hex[:8]}"},
        )
        await connection.execute(
            text(
                "INSERT INTO kb_documents (tenant_id, id, title, content_hash, status, "
                "chunk_count) VALUES (:t, :d, 'doc', :h, 'ready', :n)"
            ),
            {"t": tenant, "d": document, "h": document.hex, "n": chunks},
        )
        for ordinal, vector in enumerate(vectors):
            await connection.execute(
                text(
                    "INSERT INTO kb_chunks (tenant_id, id, document_id, ordinal, text, "
                    "token_count, embedding) VALUES (:t, :i, :d, :o, 'x', 1, CAST(:v AS vector))"
                ),
                {
                    "t": tenant,
                    "i": uuid.uuid4(),
                    "d": document,
                    "o": ordinal,
                    "v": str(list(vector)),
                },
            )
    return tenant


async def _indexes(owner: AsyncEngine) -> dict[str, bool]:
    async with owner.connect() as connection:
        rows = await connection.execute(
            text(
                "SELECT c.relname, i.indisvalid FROM pg_index i "
                "JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname LIKE :p"
            ),
            {"p": PREFIX + "%"},
        )
        return {name: valid for name, valid in rows}


async def _index_of_plan(owner: AsyncEngine, tenant: uuid.UUID) -> str:
    """The index the product's HNSW search statement scans for `tenant`, as the planner
    chooses it when a sort is not an option (the tiny table would otherwise be scanned)."""
    # The tenant and the limit are written into the statement (ADR 0096): rendered here.
    vector = list((await HashingEmbedder().embed([f"passage 1 of {tenant}"]))[0])
    statement = _nearest_statement(KB, exact=False).params(tenant=tenant, limit=3, vector=vector)
    compiled = statement.compile(
        dialect=postgresql.dialect(paramstyle="named"),  # type: ignore[no-untyped-call]
        compile_kwargs={"render_postcompile": True},
    )
    params = {"distance_1": 1, "param_1": 1, "status_1": "ready", "vector": str(vector)}
    async with owner.begin() as connection:
        await connection.execute(text("SET LOCAL enable_sort = off"))
        # The tenant is in the statement's text, so even a generic plan is made for it.
        sql = re.sub(r"::(\w+)", r"\\:\\:\1", str(compiled))  # casts, not parameters
        rows = await connection.execute(text("EXPLAIN " + sql), params)
        plan = "\n".join(row[0] for row in rows)
    names = [word for word in plan.split() if word.startswith("ix_kb_chunks_")]
    assert names, plan
    return names[0]


async def test_a_large_tenant_gets_an_index_of_its_own_and_its_searches_take_it(
    owner: AsyncEngine,
) -> None:
    small = await _tenant_with_chunks(owner, MIN_CHUNKS - 1)
    large = await _tenant_with_chunks(owner, MIN_CHUNKS + 1)
    whale = await _tenant_with_chunks(owner, 4 * MIN_CHUNKS)  # more than half of all chunks

    changes = await ensure(owner, MIN_CHUNKS, "64MB")

    assert changes.built == [index_name(large)]
    assert changes.dropped == []
    assert await _indexes(owner) == {index_name(large): True}
    assert await _index_of_plan(owner, large) == index_name(large)
    assert await _index_of_plan(owner, small) == "ix_kb_chunks_embedding_hnsw"
    assert await _index_of_plan(owner, whale) == "ix_kb_chunks_embedding_hnsw"

    again = await ensure(owner, MIN_CHUNKS, "64MB")
    assert (again.built, again.dropped) == ([], [])


async def test_an_interrupted_build_is_built_again_and_a_gone_tenant_loses_its_index(
    owner: AsyncEngine,
) -> None:
    await _tenant_with_chunks(owner, 4 * MIN_CHUNKS)
    large = await _tenant_with_chunks(owner, MIN_CHUNKS + 1)
    await ensure(owner, MIN_CHUNKS, "64MB")
    async with owner.begin() as connection:  # what a cancelled CONCURRENTLY build leaves
        await connection.execute(
            text("UPDATE pg_index SET indisvalid = false WHERE indexrelid = CAST(:n AS regclass)"),
            {"n": index_name(large)},
        )
    assert await _indexes(owner) == {index_name(large): False}

    rebuilt = await ensure(owner, MIN_CHUNKS, "64MB")

    assert rebuilt.built == [index_name(large)]
    assert await _indexes(owner) == {index_name(large): True}

    async with owner.begin() as connection:
        await connection.execute(text("DELETE FROM tenants WHERE id = :t"), {"t": large})
    gone = await ensure(owner, MIN_CHUNKS, "64MB")
    assert (gone.built, gone.dropped) == ([], [index_name(large)])
    assert await _indexes(owner) == {}


async def test_one_process_builds_at_a_time(owner: AsyncEngine) -> None:
    await _tenant_with_chunks(owner, 4 * MIN_CHUNKS)
    large = await _tenant_with_chunks(owner, MIN_CHUNKS + 1)
    async with owner.connect() as elsewhere:
        await elsewhere.execute(text("SELECT pg_advisory_lock(x'746872656164'::bigint)"))
        held = await ensure(owner, MIN_CHUNKS, "64MB")
        await elsewhere.execute(text("SELECT pg_advisory_unlock(x'746872656164'::bigint)"))
        await elsewhere.commit()
    assert (held.built, held.dropped) == ([], [])
    assert await _indexes(owner) == {}

    free = await ensure(owner, MIN_CHUNKS, "64MB")
    assert free.built == [index_name(large)]
