"""`threadline index-tenants`: build the HNSW indexes large tenants lack, now (the API
process does it on a timer, `THREADLINE_RETRIEVAL_TENANT_INDEX_SECONDS`; ADR 0095)."""

from __future__ import annotations

import asyncio

import typer

from app.cli.common import ready_database, run
from app.config import Settings


async def index_tenants(settings: Settings) -> tuple[list[str], list[str]]:
    """One pass of the tenants' own indexes: the names built and dropped."""
    from app.core.database_urls import resolve_database_urls
    from app.core.db import create_engine
    from app.retrieval.tenant_indexes.maintenance import ensure

    await ready_database(settings)
    urls = await asyncio.to_thread(resolve_database_urls, settings)
    engine = create_engine(urls.owner, pool_size=1, max_overflow=0)
    try:
        changes = await ensure(
            engine,
            settings.retrieval_tenant_index_min_chunks,
            settings.retrieval_tenant_index_build_memory,
        )
    finally:
        await engine.dispose()
    return changes.built, changes.dropped


def index_tenants_command() -> None:
    """Build the HNSW index of every tenant with at least
    THREADLINE_RETRIEVAL_TENANT_INDEX_MIN_CHUNKS chunks that lacks one (without blocking
    writers), and drop those of tenants gone or shrunk."""
    built, dropped = run(index_tenants)
    typer.echo(f"built {len(built)} tenant index(es), dropped {len(dropped)}")
    for name in built:
        typer.echo(f"  built   {name}")
    for name in dropped:
        typer.echo(f"  dropped {name}")
