"""Row-level security stops queries that forget the tenant filter, on its own."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, create_async_engine

from app.config import Settings
from app.core.database_urls import resolve_database_urls
from app.core.db import create_sessionmaker, scope_to_tenant
from app.models import TENANT_OWNED_TABLES
from tests.factories import make_session, make_tenant, make_turn, make_user


async def _populate(db: AsyncSession) -> tuple[uuid.UUID, uuid.UUID]:
    """Two tenants with a row in every tenant-owned table (and a checkpoint)."""
    ids = []
    for _ in range(2):
        tenant = await make_tenant(db)
        user = await make_user(db, tenant)
        chat = await make_session(db, user)
        turn = await make_turn(db, chat)
        await scope_to_tenant(db, tenant.id)
        params = {
            "t": tenant.id,
            "u": user.id,
            "s": chat.id,
            "d": uuid.uuid4(),
            "a": uuid.uuid4(),
            "f": uuid.uuid4(),
            "g": uuid.uuid4(),
            "st": str(chat.id),
            "q": turn.id,
        }
        for statement in ROWS_FOR_EVERY_TABLE:
            await db.execute(text(statement), params)
        await db.commit()
        ids.append(tenant.id)
    return ids[0], ids[1]


ROWS_FOR_EVERY_TABLE = [
    "INSERT INTO api_keys (tenant_id, id, user_id, name, key_prefix, key_hash, role) "
    "VALUES (:t, gen_random_uuid(), :u, 'k', 'tl_', md5(random()::text), 'member')",
    "INSERT INTO attachments (tenant_id, id, user_id, content_hash) VALUES (:t, :a, :u, 'h')",
    "INSERT INTO attachment_chunks (tenant_id, id, attachment_id, ordinal, text, token_count) "
    "VALUES (:t, gen_random_uuid(), :a, 0, 'chunk', 1)",
    "INSERT INTO session_attachments (tenant_id, session_id, attachment_id) VALUES (:t, :s, :a)",
    "INSERT INTO kb_documents (tenant_id, id, title, content_hash) VALUES (:t, :d, 'doc', 'h')",
    "INSERT INTO kb_chunks (tenant_id, id, document_id, ordinal, text, token_count) "
    "VALUES (:t, gen_random_uuid(), :d, 0, 'chunk', 1)",
    "INSERT INTO kb_document_events (tenant_id, id, document_id, status) "
    "VALUES (:t, gen_random_uuid(), :d, 'pending')",
    "INSERT INTO audit_log (tenant_id, actor_user_id, action) VALUES (:t, :u, 'read')",
    # The kb_documents row above made the tenant's default collection (migration 0031).
    "INSERT INTO groups (tenant_id, id, name) VALUES (:t, :g, 'staff')",
    "INSERT INTO group_members (tenant_id, group_id, user_id) VALUES (:t, :g, :u)",
    "INSERT INTO kb_collection_groups (tenant_id, collection_id, group_id) "
    "SELECT :t, id, :g FROM kb_collections WHERE tenant_id = :t",
    "INSERT INTO session_collections (tenant_id, session_id, collection_id) "
    "SELECT :t, :s, id FROM kb_collections WHERE tenant_id = :t",
    "INSERT INTO refresh_token_families (tenant_id, id, user_id, expires_at) "
    "VALUES (:t, :f, :u, now() + interval '1 day')",
    "INSERT INTO refresh_token_uses (tenant_id, jti, family_id) VALUES (:t, 'j', :f)",
    # A vector of the column's own dimension (pgvector keeps it as the type modifier).
    "INSERT INTO faqs (tenant_id, id, question, answer, embedding) VALUES (:t, gen_random_uuid(), "
    "'q', 'a', array_fill(0.1::real, ARRAY[(SELECT atttypmod FROM pg_attribute "
    "WHERE attrelid = 'faqs'::regclass AND attname = 'embedding')])::vector)",
    "INSERT INTO turn_feedback (tenant_id, turn_id, user_id, value) VALUES (:t, :q, :u, 'up')",
    "INSERT INTO sso_providers (tenant_id, display_name, issuer, client_id, "
    "client_secret_encrypted, allowed_domains) VALUES (:t, 'IdP', 'https://idp', 'c', 's', '{}')",
    "INSERT INTO sso_login_attempts (tenant_id, state_hash, browser_hash, nonce, code_verifier, "
    "issuer, expires_at) VALUES (:t, md5(random()::text), 'b', 'n', 'v', 'https://idp', now())",
    "INSERT INTO checkpoints (thread_id, checkpoint_id, checkpoint) VALUES (:st, 'c1', '{}')",
    "INSERT INTO checkpoint_blobs (thread_id, channel, version, type) "
    "VALUES (:st, 'ch', '1', 'empty')",
    "INSERT INTO checkpoint_writes (thread_id, checkpoint_id, task_id, idx, channel, blob) "
    "VALUES (:st, 'c1', 't', 0, 'ch', '')",
]
CHECKPOINT_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")


async def _scope(connection: AsyncConnection, tenant: uuid.UUID | None) -> None:
    await connection.execute(
        text("SELECT set_config('threadline.tenant_id', :t, true)"),
        {"t": str(tenant) if tenant else ""},
    )


async def _count(connection: AsyncConnection, table: str, tenant: uuid.UUID | None) -> int:
    # A raw, unfiltered SELECT: only RLS stands between it and other tenants' rows.
    async with connection.begin_nested():
        await _scope(connection, tenant)
        return int((await connection.execute(text(f"SELECT count(*) FROM {table}"))).scalar_one())


async def test_a_raw_select_scoped_to_one_tenant_sees_none_of_anothers_rows(
    db: AsyncSession, connection: AsyncConnection
) -> None:
    tenant_a, tenant_b = await _populate(db)
    for table in ("tenants", "users", "chat_sessions", "query_history"):
        tenant_column = "id" if table == "tenants" else "tenant_id"
        async with connection.begin_nested():
            await _scope(connection, tenant_a)
            seen = (
                (await connection.execute(text(f"SELECT DISTINCT {tenant_column} FROM {table}")))
                .scalars()
                .all()
            )
        assert seen == [tenant_a], table
        assert tenant_b not in seen


async def test_every_table_shows_each_tenant_only_its_own_rows(
    db: AsyncSession, connection: AsyncConnection
) -> None:
    tenant_a, tenant_b = await _populate(db)
    for table in ("tenants", *TENANT_OWNED_TABLES, *CHECKPOINT_TABLES):
        assert await _count(connection, table, tenant_a) == 1, table
        assert await _count(connection, table, tenant_b) == 1, table


async def test_without_a_tenant_nothing_is_visible(
    db: AsyncSession, connection: AsyncConnection
) -> None:
    await _populate(db)
    for table in ("tenants", *TENANT_OWNED_TABLES, *CHECKPOINT_TABLES):
        assert await _count(connection, table, None) == 0, table


async def test_a_checkpoint_cannot_be_written_for_another_tenants_session(
    db: AsyncSession, connection: AsyncConnection
) -> None:
    tenant_a, tenant_b = await _populate(db)
    async with connection.begin_nested():
        await _scope(connection, tenant_b)
        foreign = (await connection.execute(text("SELECT id FROM chat_sessions"))).scalar_one()
    with pytest.raises(DBAPIError, match="row-level security"):
        async with connection.begin_nested():
            await _scope(connection, tenant_a)
            await connection.execute(
                text(
                    "INSERT INTO checkpoints (thread_id, checkpoint_id, checkpoint) "
                    "VALUES (:s, 'forged', '{}')"
                ),
                {"s": str(foreign)},
            )


async def test_writing_a_row_into_another_tenant_is_refused(
    db: AsyncSession, connection: AsyncConnection
) -> None:
    tenant_a, tenant_b = await _populate(db)
    with pytest.raises(DBAPIError, match="row-level security"):
        async with connection.begin_nested():
            await _scope(connection, tenant_a)
            await connection.execute(
                text(
                    "INSERT INTO audit_log (tenant_id, actor_user_id, action) "
                    "VALUES (:b, gen_random_uuid(), 'forged')"
                ),
                {"b": tenant_b},
            )


async def test_moving_a_row_to_another_tenant_is_refused(
    db: AsyncSession, connection: AsyncConnection
) -> None:
    tenant_a, tenant_b = await _populate(db)
    with pytest.raises(DBAPIError, match="row-level security"):
        async with connection.begin_nested():
            await _scope(connection, tenant_a)
            await connection.execute(
                text("UPDATE chat_sessions SET title = 'moved', tenant_id = :b"), {"b": tenant_b}
            )


async def test_the_application_role_neither_owns_the_tables_nor_bypasses_rls(
    connection: AsyncConnection,
) -> None:
    role = (
        await connection.execute(
            text(
                "SELECT rolname, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user"
            )
        )
    ).one()
    assert role.rolsuper is False
    assert role.rolbypassrls is False
    owned = (
        (
            await connection.execute(
                text(
                    "SELECT tablename FROM pg_tables "
                    "WHERE schemaname = 'public' AND tableowner = current_user"
                )
            )
        )
        .scalars()
        .all()
    )
    assert owned == []


async def test_rls_is_enabled_and_forced_on_every_table_with_a_tenant(
    connection: AsyncConnection,
) -> None:
    rows = list(
        (
            await connection.execute(
                text(
                    """
                SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity
                FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = 'public' AND c.relkind = 'r'
                  AND (c.relname = 'tenants' OR EXISTS (
                    SELECT 1 FROM information_schema.columns col
                    WHERE col.table_schema = 'public' AND col.table_name = c.relname
                      AND col.column_name = 'tenant_id'))
                """
                )
            )
        ).all()
    )
    tables = {row.relname for row in rows}
    # The checkpoint tables carry a tenant tag too (migration 0011).
    assert tables == {"tenants", *TENANT_OWNED_TABLES, *CHECKPOINT_TABLES}
    for row in rows:
        assert row.relrowsecurity and row.relforcerowsecurity, row.relname


async def test_the_audit_log_is_append_only_for_the_application(
    db: AsyncSession, connection: AsyncConnection
) -> None:
    tenant_a, _ = await _populate(db)
    await scope_to_tenant(db, tenant_a)
    await db.execute(
        text("INSERT INTO audit_log (tenant_id, actor_user_id, action) VALUES (:t, :u, 'read')"),
        {"t": tenant_a, "u": uuid.uuid4()},
    )
    await db.commit()
    for statement in ("UPDATE audit_log SET action = 'nothing'", "DELETE FROM audit_log"):
        with pytest.raises(DBAPIError, match="permission denied"):
            async with connection.begin_nested():
                await connection.execute(text(statement))


async def test_a_pooled_connection_never_carries_a_tenant_into_the_next_transaction(
    test_database: Settings,
) -> None:
    # A real pool of one connection and real commits, outside the test's rolled-back transaction.
    engine = create_async_engine(
        resolve_database_urls(test_database).app, pool_size=1, max_overflow=0
    )
    sessions = create_sessionmaker(engine)
    tenant = uuid.uuid4()
    setting = text("SELECT current_setting('threadline.tenant_id', true)")
    try:
        async with sessions() as first:
            await scope_to_tenant(first, tenant)
            assert (await first.execute(setting)).scalar_one() == str(tenant)
            await first.commit()
            # The same session's next transaction is scoped again by the hook ...
            assert (await first.execute(setting)).scalar_one() == str(tenant)
            await first.rollback()
        async with sessions() as second:  # ... but the next user of the connection is not.
            assert (await second.execute(setting)).scalar_one() == ""
        async with engine.connect() as raw:  # nor is anyone bypassing the ORM.
            assert (await raw.execute(setting)).scalar_one() in ("", None)
    finally:
        await engine.dispose()
