"""What every database command shares: settings, one async job, errors as messages.

With no `DATABASE_URL`, a command attaches to the embedded PostgreSQL under
`THREADLINE_DATA_DIR` and brings its schema to head first, so separate commands see the same,
ready data. Against an external database, `threadline migrate` is an explicit step.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import typer
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings, get_settings
from app.core.errors import AppError

T = TypeVar("T")

ROLES = ("member", "admin")


def fail(message: str) -> typer.Exit:
    """Print `message` as an error; the exit to raise (status 1)."""
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    return typer.Exit(1)


def run(job: Callable[[Settings], Coroutine[Any, Any, T]]) -> T:
    """Run one async job; expected failures become a message and exit code 1, not a trace."""
    from sqlalchemy.exc import SQLAlchemyError

    from app.core.embedded import EmbeddedDatabaseError
    from app.embeddings.base import EmbedderConfigError
    from app.embeddings.space import EmbeddingMismatchError

    try:
        settings = get_settings()
    except ValueError as exc:  # pydantic's ValidationError: a bad setting
        raise fail(f"invalid configuration: {exc}") from exc
    try:
        return asyncio.run(job(settings))
    except AppError as exc:
        raise fail(exc.message) from exc
    except (EmbeddedDatabaseError, EmbeddingMismatchError, EmbedderConfigError) as exc:
        raise fail(str(exc)) from exc
    except (SQLAlchemyError, OSError) as exc:
        raise fail(f"cannot use the database: {exc.__class__.__name__}: {exc}") from exc


async def migrate_schema(settings: Settings, revision: str = "head") -> None:
    """Bring the schema to `revision`, as the owner role."""
    from app.core import migrate
    from app.core.database_urls import resolve_database_urls

    urls = await asyncio.to_thread(resolve_database_urls, settings)
    await migrate.upgrade(settings, urls.owner, revision)


async def ready_database(settings: Settings) -> None:
    """The embedded database brought to head; an external one is migrated explicitly."""
    if settings.embedded_database:
        await migrate_schema(settings)


@asynccontextmanager
async def transaction(settings: Settings) -> AsyncIterator[AsyncSession]:
    """A transaction as the application role (RLS applies), committed on success."""
    from app.bootstrap import open_database

    await ready_database(settings)
    database = await open_database(settings, pool_size=1, max_overflow=0)
    try:
        async with database.sessionmaker() as db, db.begin():
            yield db
    finally:
        await database.dispose()
