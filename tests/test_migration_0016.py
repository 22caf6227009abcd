"""Revision 0016: duplicate attachments stored before it are merged into the oldest, then a
unique constraint keeps it so; downgrade and upgrade again work."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from app.config import Settings
from app.core import migrate
from tests.conftest import run_sql


async def _seed(connection: AsyncConnection, ids: dict[str, uuid.UUID]) -> None:
    t, u = ids["tenant"], ids["user"]
    statements = [
        "INSERT INTO tenants (id, name) VALUES (:t, 'acme')",
        "INSERT INTO users (tenant_id, id, email, password_hash, role) "
        "VALUES (:t, :u, 'a@example.com', 'x', 'admin')",
        "INSERT INTO chat_sessions (tenant_id, id, user_id, title) VALUES (:t, :s1, :u, 'one')",
        "INSERT INTO chat_sessions (tenant_id, id, user_id, title) VALUES (:t, :s2, :u, 'two')",
        # Three copies of one file (oldest first) and one other file.
        *(
            "INSERT INTO attachments (tenant_id, id, user_id, content_hash, status, created_at) "
            f"VALUES (:t, :{name}, :u, 'same', 'ready', now() - interval '{age} minutes')"
            for name, age in (("oldest", 30), ("middle", 20), ("newest", 10))
        ),
        "INSERT INTO attachments (tenant_id, id, user_id, content_hash) "
        "VALUES (:t, :other, :u, 'other')",
        "INSERT INTO attachment_chunks (tenant_id, id, attachment_id, ordinal, text, token_count) "
        "VALUES (:t, gen_random_uuid(), :oldest, 0, 'kept', 1), "
        "(:t, gen_random_uuid(), :newest, 0, 'goes', 1)",
        # Session one has the oldest and the newest; session two only the middle copy.
        "INSERT INTO session_attachments (tenant_id, session_id, attachment_id) "
        "VALUES (:t, :s1, :oldest), (:t, :s1, :newest), (:t, :s2, :middle), (:t, :s2, :other)",
        "INSERT INTO query_history (tenant_id, id, session_id, user_id, user_query, status, "
        "attachment_ids) VALUES (:t, :turn, :s2, :u, 'q', 'complete', "
        "ARRAY[CAST(:other AS uuid), CAST(:middle AS uuid)])",
    ]
    params = {key: value for key, value in ids.items() if key not in ("tenant", "user")}
    for statement in statements:
        await connection.execute(text(statement), {"t": t, "u": u, **params})


async def test_duplicates_are_merged_into_the_oldest_and_kept_out(empty_database: Settings) -> None:
    owner = migrate.asyncpg_owner_url(empty_database)
    await migrate.upgrade(empty_database, owner, "0015")
    names = ("tenant", "user", "s1", "s2", "oldest", "middle", "newest", "other", "turn")
    ids = {name: uuid.uuid4() for name in names}
    engine = create_async_engine(owner)
    async with engine.begin() as connection:
        await _seed(connection, ids)
    await engine.dispose()

    await migrate.upgrade(empty_database, owner, "0016")

    kept = await run_sql(owner, "SELECT id FROM attachments ORDER BY content_hash DESC")
    assert kept == [(ids["oldest"],), (ids["other"],)]
    links = await run_sql(
        owner, "SELECT session_id, attachment_id FROM session_attachments ORDER BY 1, 2"
    )
    assert sorted(links) == sorted(
        [
            (ids["s1"], ids["oldest"]),
            (ids["s2"], ids["oldest"]),
            (ids["s2"], ids["other"]),
        ]
    )
    assert await run_sql(owner, "SELECT attachment_ids FROM query_history") == [
        ([ids["other"], ids["oldest"]],)
    ]
    assert await run_sql(owner, "SELECT text FROM attachment_chunks") == [("kept",)]
    forced = await run_sql(
        owner,
        "SELECT relname FROM pg_class WHERE relforcerowsecurity AND relname = ANY(:t)",
        t=["attachments", "session_attachments", "query_history"],
    )
    assert len(forced) == 3  # row-level security forced again after the clean-up

    copy = (
        "INSERT INTO attachments (tenant_id, id, user_id, content_hash) "
        "VALUES (:t, gen_random_uuid(), :u, 'same')"
    )
    with pytest.raises(Exception, match="uq_attachments_tenant_id_user_id_content_hash"):
        await run_sql(owner, copy, t=ids["tenant"], u=ids["user"])

    await migrate.downgrade(empty_database, owner, "0015")
    await run_sql(owner, copy, t=ids["tenant"], u=ids["user"])  # a plain index again
    await run_sql(
        owner, "DELETE FROM attachments WHERE id <> :o AND content_hash = 'same'", o=ids["oldest"]
    )
    await migrate.upgrade(empty_database, owner)


async def test_a_ready_copy_is_kept_before_an_older_failed_one(empty_database: Settings) -> None:
    # A failed upload uploaded again used to leave the failed row beside the ready one.
    owner = migrate.asyncpg_owner_url(empty_database)
    await migrate.upgrade(empty_database, owner, "0015")
    t, u, failed, ready = (uuid.uuid4() for _ in range(4))
    engine = create_async_engine(owner)
    async with engine.begin() as connection:
        for statement in (
            "INSERT INTO tenants (id, name) VALUES (:t, 'acme')",
            "INSERT INTO users (tenant_id, id, email, password_hash, role) "
            "VALUES (:t, :u, 'a@example.com', 'x', 'admin')",
            "INSERT INTO attachments (tenant_id, id, user_id, content_hash, status, created_at) "
            "VALUES (:t, :failed, :u, 'same', 'failed', now() - interval '30 minutes'), "
            "(:t, :ready, :u, 'same', 'ready', now() - interval '10 minutes')",
            "INSERT INTO attachment_chunks (tenant_id, id, attachment_id, ordinal, text, "
            "token_count) VALUES (:t, gen_random_uuid(), :ready, 0, 'indexed', 1)",
        ):
            await connection.execute(
                text(statement), {"t": t, "u": u, "failed": failed, "ready": ready}
            )
    await engine.dispose()

    await migrate.upgrade(empty_database, owner, "0016")

    assert await run_sql(owner, "SELECT id, status FROM attachments") == [(ready, "ready")]
    assert await run_sql(owner, "SELECT text FROM attachment_chunks") == [("indexed",)]
