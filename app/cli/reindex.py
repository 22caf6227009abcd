"""`threadline reindex`: re-embed everything with the configured embedder, with a progress bar;
search goes on with the old vectors until the new ones are complete (app/embeddings/reindex.py).
"""

from __future__ import annotations

import asyncio

import typer

from app.cli.common import ready_database, run
from app.config import Settings


async def reindex_database(settings: Settings) -> tuple[str, str | None, int]:
    """Re-embed every stored vector into the configured embedder's space and switch to it:
    the new model, the one it replaced, and the rows re-embedded."""
    from rich.progress import Progress

    from app.core.database_urls import resolve_database_urls
    from app.core.db import create_engine, create_sessionmaker
    from app.embeddings.factory import build_embedder
    from app.embeddings.reindex import Reindex
    from app.embeddings.repository import recorded_model

    await ready_database(settings)
    embedder = build_embedder(settings)
    urls = await asyncio.to_thread(resolve_database_urls, settings)
    engine = create_engine(urls.owner, pool_size=2, max_overflow=0)
    sessions = create_sessionmaker(engine)
    try:
        async with sessions() as db, db.begin():
            previous = await recorded_model(db)
        with Progress(transient=False) as progress:
            bar = progress.add_task(f"re-embedding ({embedder.name})", total=None)
            job = Reindex(sessions, engine, embedder, lambda n: progress.advance(bar, n))
            total, done = await job.start()
            progress.update(bar, total=total, completed=done)
            if job.resumed:
                progress.console.print(f"resuming: {done} of {total} rows already re-embedded")
            await job.fill()
            progress.update(bar, description="building the index and switching")
            await job.finish()
            progress.update(bar, completed=total)
    finally:
        await engine.dispose()
    return embedder.name, previous, total


def reindex_command() -> None:
    """Re-embed all documents, attachments and FAQs with THREADLINE_EMBEDDER, then switch to
    the new vectors at once (search keeps the old ones until then). Restart the servers with
    the same THREADLINE_EMBEDDER afterwards."""
    model, previous, rows = run(reindex_database)
    typer.echo(f"{rows} rows re-embedded: {previous or 'nothing'} -> {model}")
    typer.echo("restart the servers and workers with this THREADLINE_EMBEDDER")
