"""`threadline serve`, `migrate` and `downgrade`: run the API and move the schema."""

from __future__ import annotations

import asyncio
import signal
import sys
from typing import Annotated

import typer

from app.cli.common import migrate_schema, run
from app.config import Settings, get_settings


def serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    workers: Annotated[int, typer.Option(min=1, help="Worker processes.")] = 1,
) -> None:
    """Serve the HTTP API (migrating the embedded database first)."""
    import uvicorn

    from app.cli.http_protocol import HeadDeadlineProtocol
    from app.core.logging import configure_logging

    settings = get_settings()
    configure_logging(settings.log_level, settings.log_json)
    if settings.embedded_database:
        run(migrate_schema)
    # uvicorn re-raises SIGTERM after its graceful shutdown; exiting normally instead lets
    # atexit detach this process from the embedded PostgreSQL (see app.core.embedded).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    uvicorn.run(
        "app.main:app_factory",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_config=None,
        # X-Forwarded-For is read by ClientAddressMiddleware, from THREADLINE_TRUSTED_PROXIES
        # only: uvicorn's own reading believes any loopback peer.
        proxy_headers=False,
        # A request's head must arrive within THREADLINE_HTTP_HEADER_TIMEOUT_SECONDS.
        http=HeadDeadlineProtocol,
        timeout_graceful_shutdown=10,
    )


def migrate(
    revision: Annotated[str, typer.Argument(help="Target revision.")] = "head",
) -> None:
    """Bring the database schema (LangGraph's checkpoint tables included) to REVISION."""
    run(lambda settings: migrate_schema(settings, revision))
    typer.echo(f"database migrated to {revision}")


def downgrade(revision: Annotated[str, typer.Argument(help="Target revision, or 'base'.")]) -> None:
    """Revert the schema to REVISION."""
    from app.core import migrate as migrations
    from app.core.database_urls import resolve_database_urls

    async def job(settings: Settings) -> None:
        urls = await asyncio.to_thread(resolve_database_urls, settings)
        await migrations.downgrade(settings, urls.owner, revision)

    run(job)
    typer.echo(f"database downgraded to {revision}")
