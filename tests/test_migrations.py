"""Migrations: upgrade, downgrade and upgrade again on an empty database; models match them."""

from __future__ import annotations

from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import URL, Connection
from sqlalchemy.ext.asyncio import create_async_engine

from app.config import Settings
from app.core import migrate
from app.models import Base

CHECKPOINT_TABLES = {
    "checkpoints",
    "checkpoint_blobs",
    "checkpoint_writes",
    "checkpoint_migrations",
}


async def _tables(url: URL) -> set[str]:
    engine = create_async_engine(url)
    async with engine.connect() as connection:
        rows = await connection.execute(
            text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        )
        names = set(rows.scalars())
    await engine.dispose()
    return names


async def test_upgrade_downgrade_upgrade(empty_database: Settings) -> None:
    owner = migrate.asyncpg_owner_url(empty_database)
    await migrate.upgrade(empty_database, owner)
    expected = set(Base.metadata.tables) | CHECKPOINT_TABLES | {"alembic_version"}
    assert await _tables(owner) == expected

    await migrate.downgrade(empty_database, owner, "base")
    assert await _tables(owner) == {"alembic_version"}

    await migrate.upgrade(empty_database, owner)
    assert await _tables(owner) == expected


async def test_every_revision_steps_down_and_up_one_at_a_time(empty_database: Settings) -> None:
    owner = migrate.asyncpg_owner_url(empty_database)
    await migrate.upgrade(empty_database, owner)
    revisions = len(
        list(ScriptDirectory(str(migrate.PROJECT_ROOT / "migrations")).walk_revisions())
    )
    assert revisions >= 7
    for _ in range(revisions):
        await migrate.downgrade(empty_database, owner, "-1")
        await migrate.upgrade(empty_database, owner, "+1")
        await migrate.downgrade(empty_database, owner, "-1")
    assert await _tables(owner) == {"alembic_version"}


def _diff(connection: Connection) -> list[Any]:
    context = MigrationContext.configure(connection, opts={"compare_type": True})
    return list(compare_metadata(context, Base.metadata))


async def test_the_models_match_the_migrated_schema(test_database: Settings) -> None:
    engine = create_async_engine(migrate.asyncpg_owner_url(test_database))
    async with engine.connect() as connection:
        diff = await connection.run_sync(_diff)
    await engine.dispose()
    ignored_tables = CHECKPOINT_TABLES  # owned by langgraph-checkpoint-postgres, not our models
    relevant = [
        d
        for d in diff
        if not (isinstance(d, tuple) and d[0] == "remove_table" and d[1].name in ignored_tables)
        and not (
            isinstance(d, tuple) and d[0] == "remove_index" and d[1].table.name in ignored_tables
        )
    ]
    assert relevant == [], "\n".join(map(str, relevant))


async def test_every_checkpoint_table_has_a_tenant_index(test_database: Settings) -> None:
    """Their RLS policies filter on tenant_id; erasure and retention delete by it."""
    engine = create_async_engine(migrate.asyncpg_owner_url(test_database))
    async with engine.connect() as connection:
        rows = await connection.execute(
            text(
                "SELECT tablename FROM pg_indexes WHERE schemaname = 'public' "
                "AND indexdef LIKE '%(tenant_id)'"
            )
        )
        indexed = set(rows.scalars())
    await engine.dispose()
    assert {"checkpoints", "checkpoint_blobs", "checkpoint_writes"} <= indexed


def test_the_frozen_checkpointer_schema_matches_the_installed_library() -> None:
    """Revision 0006 copies langgraph-checkpoint-postgres' migrations; an upgrade of the
    library that changes them needs a new revision."""
    import importlib.util
    import sys
    from pathlib import Path

    from langgraph.checkpoint.postgres.base import MIGRATIONS

    versions = Path(__file__).resolve().parents[1] / "migrations"
    sys.path.insert(0, str(versions))
    try:
        path = next((versions / "versions").glob("*_0006_langgraph_checkpointer.py"))
        spec = importlib.util.spec_from_file_location("revision_0006", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(versions))

    def normal(sql: str) -> str:
        return " ".join(sql.replace("CONCURRENTLY ", "").split())

    assert [normal(s) for s in module.CHECKPOINTER_MIGRATIONS] == [normal(s) for s in MIGRATIONS]
