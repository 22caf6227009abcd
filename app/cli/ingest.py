"""`threadline ingest`: load files into a tenant's knowledge base now, with a progress bar."""

from __future__ import annotations

import asyncio
import re
import uuid
from pathlib import Path
from typing import Annotated

import typer

from app.cli.common import ready_database, run
from app.config import Settings
from app.core.errors import AppError

INGESTIBLE = (".pdf", ".txt", ".md", ".markdown", ".text")

# Documents ingested at once: their chunks share the embedder's calls and their claims and
# index writes share transactions. SciFact abstracts are two chunks each: 32 documents keep
# the model's calls full (64 texts); 16 left them at ~18 and the model 10% slower per chunk.
INGEST_CONCURRENCY = 32
# Few connections suffice: concurrent documents share the pipeline's transactions.
INGEST_CONNECTIONS = 8


_FIRST_HEADING = re.compile(rb"^#[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_TITLE_CHARS = 200


def title_of(raw: bytes, path: Path) -> str:
    """A document's title: a Markdown or text file's first top-level heading, else its file
    name without the extension (people read "Your data and privacy", not "data-and-privacy")."""
    if path.suffix.lower() in (".md", ".markdown", ".txt"):
        heading = _FIRST_HEADING.search(raw[:8192])
        if heading:
            title = heading.group(1).decode("utf-8", "replace").strip()
            if title:
                return title[:_TITLE_CHARS]
    return path.stem


def files_in(paths: list[Path]) -> list[tuple[Path, str]]:
    """Each file with its external id: its path relative to the folder it was found in."""
    found: list[tuple[Path, str]] = []
    for path in paths:
        if path.is_dir():
            found += [
                (p, p.relative_to(path).as_posix())
                for p in sorted(path.rglob("*"))
                if p.suffix.lower() in INGESTIBLE
            ]
        elif path.is_file():
            found.append((path, path.name))
        else:
            raise typer.BadParameter(f"{path} does not exist", param_hint="PATH")
    return found


async def ingest_files(
    settings: Settings,
    tenant_name: str,
    files: list[tuple[Path, str]],
    collection_id: uuid.UUID | None = None,
) -> dict[str, int]:
    """Add each file to the tenant's knowledge base (into `collection_id`, else its default
    collection) and ingest it now, with a progress bar."""
    from rich.progress import Progress

    from app.access.scope import check_collection
    from app.bootstrap import open_database, open_ingestion
    from app.core.db import TENANT, set_scope
    from app.embeddings.space import keep_recorded_embedder
    from app.ingestion.pipeline import ingest
    from app.ingestion.uploads import from_bytes
    from app.knowledge.service import add_document
    from app.tenants.service import require_tenant

    await ready_database(settings)
    database = await open_database(settings, pool_size=INGEST_CONNECTIONS, max_overflow=0)
    sessions = database.sessionmaker
    # skipped: taken over by a server's recovery meanwhile (this process looked stalled)
    counts = {"ready": 0, "failed": 0, "duplicate": 0, "refused": 0, "deleted": 0, "skipped": 0}
    try:
        deps = await open_ingestion(await keep_recorded_embedder(settings, sessions), sessions)
        async with sessions() as db, db.begin():
            tenant = await require_tenant(db, tenant_name)
            if collection_id is not None:  # refused before any file is read
                await set_scope(db, {TENANT: tenant.id})
                await check_collection(db, tenant.id, collection_id)
        with Progress(transient=False) as progress:
            bar = progress.add_task("ingesting", total=len(files))
            limiter = asyncio.Semaphore(INGEST_CONCURRENCY)

            async def one(path: Path, external_id: str) -> None:
                async with limiter:
                    progress.update(bar, description=path.name[:40])
                    try:
                        raw = await asyncio.to_thread(path.read_bytes)
                        upload = from_bytes(raw, path.name)
                    except AppError as exc:
                        counts["refused"] += 1
                        progress.console.print(f"[yellow]skipped {path}: {exc.message}")
                        progress.advance(bar)
                        return
                    async with sessions() as db, db.begin():
                        db.info[TENANT] = tenant.id  # applied as the transaction starts
                        document, duplicate = await add_document(
                            db,
                            tenant.id,
                            upload,
                            title=title_of(raw, path),
                            external_id=external_id,
                            metadata={},
                            created_by=None,
                            enqueue=False,
                            collection_id=collection_id,
                        )
                    if duplicate:
                        counts["duplicate"] += 1
                    else:
                        counts[await ingest(deps, "kb", tenant.id, document.id)] += 1
                    progress.advance(bar)

            await asyncio.gather(*(one(path, external_id) for path, external_id in files))
    finally:
        await database.dispose()
    return counts


def ingest_command(
    tenant: Annotated[str, typer.Option(help="Tenant name.")],
    paths: Annotated[list[Path], typer.Argument(help="Files or folders (PDF, text, Markdown).")],
    collection_id: Annotated[
        uuid.UUID | None,
        typer.Option(help="The collection they go into (default: the tenant's default)."),
    ] = None,
) -> None:
    """Load documents into a tenant's knowledge base, with a progress bar."""
    files = files_in(paths)
    counts = run(lambda settings: ingest_files(settings, tenant, files, collection_id))
    typer.echo(", ".join(f"{n} {k}" for k, n in counts.items()))
    if counts["failed"]:
        raise typer.Exit(1)
