"""Row-level security stops queries that forget the tenant filter, on its own."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from app.core.db import scope_to_tenant
from app.models import TENANT_OWNED_TABLES
from tests.factories import make_session, make_tenant, make_turn, make_user


async def _populate(db: AsyncSession) -> tuple[uuid.UUID, uuid.UUID]:
    ids = []
    for _ in range(2):
        tenant = await make_tenant(db)
        user = await make_user(db, tenant)
        await make_turn(db, await make_session(db, user))
        ids.append(tenant.id)
    return ids[0], ids[1]


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


async def test_without_a_tenant_nothing_is_visible(
    db: AsyncSession, connection: AsyncConnection
) -> None:
    await _populate(db)
    for table in ("tenants", *TENANT_OWNED_TABLES):
        assert await _count(connection, table, None) == 0, table


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
    rows = (
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
    tables = {row.relname for row in rows}
    assert tables == {"tenants", *TENANT_OWNED_TABLES}
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
