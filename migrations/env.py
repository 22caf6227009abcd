"""Alembic environment: async engine on the owner's connection.

The URL, the application role and the embedding dimension come from `config.attributes`
(set by `app.core.migrate`) or else from Threadline's settings, so `alembic upgrade head`
and `threadline migrate` do the same thing.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

sys.path.insert(0, str(Path(__file__).resolve().parent))

import app.models  # noqa: F401 - register every table on the metadata
from app.core.db import Base

config = context.config
target_metadata = Base.metadata


def _fill_attributes() -> None:
    if "database_url" in config.attributes:
        return
    from app.config import get_settings
    from app.core.database_urls import resolve_database_urls

    settings = get_settings()
    config.attributes["database_url"] = resolve_database_urls(settings).owner
    config.attributes["app_role"] = settings.app_db_role
    config.attributes["app_password"] = settings.app_db_password.get_secret_value()
    config.attributes["embedding_dim"] = settings.embedding_dim


# Serialises concurrent `threadline` processes migrating one database (e.g. two CLI commands
# on a fresh embedded server): the second waits, then finds nothing left to do.
MIGRATION_LOCK_KEY = 7_486_214_533


def _run(connection: Connection) -> None:
    connection.exec_driver_sql(f"SELECT pg_advisory_lock({MIGRATION_LOCK_KEY})")
    connection.commit()
    try:
        _migrate(connection)
    finally:
        connection.exec_driver_sql(f"SELECT pg_advisory_unlock({MIGRATION_LOCK_KEY})")
        connection.commit()


def _migrate(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        compare_type=True,
        transaction_per_migration=True,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_async() -> None:
    engine = create_async_engine(config.attributes["database_url"])
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run)
    finally:
        await engine.dispose()


_fill_attributes()
if context.is_offline_mode():
    raise SystemExit("offline migrations are not supported; run `threadline migrate`")
asyncio.run(_run_async())
