"""Run Alembic from code: `threadline migrate`, the test harness and `/readyz` use this."""

from __future__ import annotations

import asyncio
import sys
from functools import lru_cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncConnection

from app.config import Settings

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def alembic_config(settings: Settings, owner_url: URL) -> Config:
    """An Alembic configuration for the project's migrations on the owner URL."""
    config = Config(str(PROJECT_ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(PROJECT_ROOT / "migrations"))
    config.attributes["database_url"] = owner_url
    config.attributes["app_role"] = settings.app_db_role
    config.attributes["app_password"] = settings.app_db_password.get_secret_value()
    config.attributes["embedding_dim"] = settings.embedding_dim
    return config


def _in_thread(fn_name: str, settings: Settings, owner_url: URL, revision: str) -> None:
    # env.py drives its own event loop with asyncio.run, so Alembic must not run on ours.
    getattr(command, fn_name)(alembic_config(settings, owner_url), revision)


async def upgrade(settings: Settings, owner_url: URL, revision: str = "head") -> None:
    """Migrate the database up to `revision`, off the event loop."""
    await asyncio.to_thread(_in_thread, "upgrade", settings, owner_url, revision)


async def downgrade(settings: Settings, owner_url: URL, revision: str) -> None:
    """Migrate the database down to `revision`, off the event loop."""
    await asyncio.to_thread(_in_thread, "downgrade", settings, owner_url, revision)


@lru_cache(maxsize=1)
def head_revision() -> str:
    # Reading the revisions imports them, and they import `rls_ops` from their directory
    # (env.py puts it on the path when Alembic runs; a server that never migrated has not).
    """The newest migration revision in the code."""
    migrations = str(PROJECT_ROOT / "migrations")
    if migrations not in sys.path:
        sys.path.append(migrations)
    script = ScriptDirectory(migrations)
    head = script.get_current_head()
    assert head is not None
    return head


async def current_revision(connection: AsyncConnection) -> str | None:
    """The revision the database is at, or None if it has none."""
    result = await connection.execute(text("SELECT version_num FROM alembic_version"))
    return result.scalar_one_or_none()


def asyncpg_owner_url(settings: Settings) -> URL:
    """The owner URL of an explicitly configured database (no embedded start-up)."""
    from app.core.database_urls import asyncpg_url

    if settings.database_url is None:
        raise ValueError("DATABASE_URL is not set")
    return asyncpg_url(settings.database_url)
