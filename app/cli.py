"""The `threadline` command: serve, migrate, manage tenants, users and API keys, and chat.

With no `DATABASE_URL`, every command attaches to the embedded PostgreSQL under
`THREADLINE_DATA_DIR` and brings its schema to head first, so separate commands see the same,
ready data. Against an external database, `threadline migrate` is an explicit step.

Over 300 lines until the commands become an `app/cli/` package (issue 14 asks for it).
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings, get_settings
from app.core.errors import AppError

cli = typer.Typer(
    name="threadline",
    help="Threadline: multi-tenant RAG chat platform.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
tenants_cli = typer.Typer(help="Manage tenants.", no_args_is_help=True)
users_cli = typer.Typer(help="Manage users.", no_args_is_help=True)
api_keys_cli = typer.Typer(help="Manage API keys.", no_args_is_help=True)
cli.add_typer(tenants_cli, name="tenants")
cli.add_typer(users_cli, name="users")
cli.add_typer(api_keys_cli, name="api-keys")

T = TypeVar("T")

DEMO_TENANT = "demo"
DEMO_EMAIL = "admin@demo.example"
DEMO_PASSWORD = "threadline-demo"  # the documented local demo login


def _fail(message: str) -> typer.Exit:
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    return typer.Exit(1)


def _run(job: Callable[[Settings], Coroutine[Any, Any, T]]) -> T:
    """Run one async job; expected failures become a message and exit code 1, not a trace."""
    from sqlalchemy.exc import SQLAlchemyError

    from app.core.embedded import EmbeddedDatabaseError
    from app.embeddings.base import EmbedderConfigError
    from app.embeddings.space import EmbeddingMismatchError

    try:
        settings = get_settings()
    except ValueError as exc:  # pydantic's ValidationError: a bad setting
        raise _fail(f"invalid configuration: {exc}") from exc
    try:
        return asyncio.run(job(settings))
    except AppError as exc:
        raise _fail(exc.message) from exc
    except (EmbeddedDatabaseError, EmbeddingMismatchError, EmbedderConfigError) as exc:
        raise _fail(str(exc)) from exc
    except (SQLAlchemyError, OSError) as exc:
        raise _fail(f"cannot use the database: {exc.__class__.__name__}: {exc}") from exc


async def _migrate(settings: Settings, revision: str = "head") -> None:
    from app.core import migrate
    from app.core.database_urls import resolve_database_urls

    urls = await asyncio.to_thread(resolve_database_urls, settings)
    await migrate.upgrade(settings, urls.owner, revision)


@asynccontextmanager
async def _transaction(settings: Settings) -> AsyncIterator[AsyncSession]:
    """A transaction as the application role (RLS applies), committed on success."""
    from app.core.database_urls import resolve_database_urls
    from app.core.db import create_engine, create_sessionmaker

    if settings.embedded_database:
        await _migrate(settings)
    urls = await asyncio.to_thread(resolve_database_urls, settings)
    engine = create_engine(urls.app, pool_size=1, max_overflow=0)
    try:
        async with create_sessionmaker(engine)() as session, session.begin():
            yield session
    finally:
        await engine.dispose()


@cli.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    workers: Annotated[int, typer.Option(min=1, help="Worker processes.")] = 1,
) -> None:
    """Serve the HTTP API (migrating the embedded database first)."""
    import uvicorn

    from app.core.logging import configure_logging

    settings = get_settings()
    configure_logging(settings.log_level, settings.log_json)
    if settings.embedded_database:
        _run(_migrate)
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
        timeout_graceful_shutdown=10,
    )


@cli.command()
def migrate(
    revision: Annotated[str, typer.Argument(help="Target revision.")] = "head",
) -> None:
    """Bring the database schema (LangGraph's checkpoint tables included) to REVISION."""
    _run(lambda settings: _migrate(settings, revision))
    typer.echo(f"database migrated to {revision}")


@cli.command()
def downgrade(revision: Annotated[str, typer.Argument(help="Target revision, or 'base'.")]) -> None:
    """Revert the schema to REVISION."""
    from app.core import migrate as migrations
    from app.core.database_urls import resolve_database_urls

    async def job(settings: Settings) -> None:
        urls = await asyncio.to_thread(resolve_database_urls, settings)
        await migrations.downgrade(settings, urls.owner, revision)

    _run(job)
    typer.echo(f"database downgraded to {revision}")


@tenants_cli.command("create")
def tenants_create(name: Annotated[str, typer.Argument(help="Tenant name.")]) -> None:
    """Create a tenant and print its id."""
    from app.tenants.service import create_tenant

    async def job(settings: Settings) -> str:
        async with _transaction(settings) as session:
            return str((await create_tenant(session, name)).id)

    typer.echo(_run(job))


@users_cli.command("create")
def users_create(
    tenant: Annotated[str, typer.Option(help="Tenant name.")],
    email: Annotated[str, typer.Option(help="E-mail address (the login).")],
    password: Annotated[str, typer.Option(help="Password.", prompt=True, hide_input=True)],
    role: Annotated[str, typer.Option(help="member or admin.")] = "member",
) -> None:
    """Create a user in a tenant and print its id."""
    from app.auth.schemas import normalise_email
    from app.auth.service import create_user
    from app.tenants.service import require_tenant

    if role not in ("member", "admin"):
        raise typer.BadParameter("role must be 'member' or 'admin'", param_hint="--role")
    try:
        address = normalise_email(email)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--email") from exc

    async def job(settings: Settings) -> str:
        async with _transaction(settings) as session:
            found = await require_tenant(session, tenant)
            from app.core.db import scope_to_tenant

            await scope_to_tenant(session, found.id)
            user = await create_user(
                session, settings, found.id, email=address, password=password, role=role
            )
            return str(user.id)

    typer.echo(_run(job))


@api_keys_cli.command("create")
def api_keys_create(
    tenant: Annotated[str, typer.Option(help="Tenant name.")],
    email: Annotated[str, typer.Option(help="The user the key acts as.")],
    name: Annotated[str, typer.Option(help="A label for the key.")],
    role: Annotated[str, typer.Option(help="member or admin (at most the user's).")] = "member",
) -> None:
    """Create an API key acting as a user and print it (it is shown only once)."""
    if role not in ("member", "admin"):
        raise typer.BadParameter("role must be 'member' or 'admin'", param_hint="--role")
    from app.auth.principal import Principal
    from app.auth.repository import UserRepository
    from app.auth.service import create_api_key
    from app.core.db import scope_to_tenant
    from app.core.errors import NotFound
    from app.tenants.service import require_tenant

    async def job(settings: Settings) -> str:
        async with _transaction(settings) as session:
            found = await require_tenant(session, tenant)
            await scope_to_tenant(session, found.id)
            user = await UserRepository(session, found.id).by_email(email.strip().lower())
            if user is None:
                raise NotFound(f"No user {email!r} in tenant {tenant!r}.")
            owner = Principal(user.id, found.id, user.email, user.role, "token")
            _, raw = await create_api_key(session, owner, name=name, role=role)
            return raw

    typer.echo(_run(job))


INGESTIBLE = (".pdf", ".txt", ".md", ".markdown", ".text")


def _files(paths: list[Path]) -> list[tuple[Path, str]]:
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


# Documents ingested at once: their chunks share the embedder's calls and their claims and
# index writes share transactions. SciFact abstracts are two chunks each: 32 documents keep
# the model's calls full (64 texts); 16 left them at ~18 and the model 10% slower per chunk.
INGEST_CONCURRENCY = 32
# Few connections suffice: concurrent documents share the pipeline's transactions.
INGEST_CONNECTIONS = 8


async def _ingest_files(
    settings: Settings, tenant_name: str, files: list[tuple[Path, str]]
) -> dict[str, int]:
    """Add each file to the tenant's knowledge base and ingest it now, with a progress bar."""
    from rich.progress import Progress

    from app.core.database_urls import resolve_database_urls
    from app.core.db import TENANT, create_engine, create_sessionmaker
    from app.embeddings.factory import build_embedder
    from app.embeddings.space import check_embedding_space
    from app.ingestion.pipeline import IngestionDeps, ingest
    from app.ingestion.uploads import from_bytes
    from app.knowledge.service import add_document
    from app.tenants.service import require_tenant

    if settings.embedded_database:
        await _migrate(settings)
    urls = await asyncio.to_thread(resolve_database_urls, settings)
    engine = create_engine(urls.app, pool_size=INGEST_CONNECTIONS, max_overflow=0)
    sessions = create_sessionmaker(engine)
    deps = IngestionDeps.from_settings(settings, sessions, build_embedder(settings))
    # skipped: taken over by a server's recovery meanwhile (this process looked stalled)
    counts = {"ready": 0, "failed": 0, "duplicate": 0, "refused": 0, "deleted": 0, "skipped": 0}
    try:
        async with sessions() as db, db.begin():
            await check_embedding_space(db, deps.embedder)
            tenant = await require_tenant(db, tenant_name)
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
                            db, tenant.id, upload, title=path.stem, external_id=external_id,
                            metadata={}, created_by=None, enqueue=False,
                        )  # fmt: skip
                    if duplicate:
                        counts["duplicate"] += 1
                    else:
                        counts[await ingest(deps, "kb", tenant.id, document.id)] += 1
                    progress.advance(bar)

            await asyncio.gather(*(one(path, external_id) for path, external_id in files))
    finally:
        await engine.dispose()
    return counts


@cli.command("ingest")
def ingest_command(
    tenant: Annotated[str, typer.Option(help="Tenant name.")],
    paths: Annotated[list[Path], typer.Argument(help="Files or folders (PDF, text, Markdown).")],
) -> None:
    """Load documents into a tenant's knowledge base, with a progress bar."""
    files = _files(paths)
    counts = _run(lambda settings: _ingest_files(settings, tenant, files))
    typer.echo(", ".join(f"{n} {k}" for k, n in counts.items()))
    if counts["failed"]:
        raise typer.Exit(1)


@cli.command()
def demo(
    url: Annotated[str, typer.Option(help="Where the server will listen.")] = (
        "http://127.0.0.1:8000"
    ),
) -> None:
    """Create the demo tenant and admin (once) and print how to log in."""
    from app.auth.service import create_user
    from app.core.db import scope_to_tenant
    from app.tenants.repository import find_tenant_by_name
    from app.tenants.service import create_tenant

    async def job(settings: Settings) -> bool:
        async with _transaction(settings) as session:
            tenant = await find_tenant_by_name(session, DEMO_TENANT)
            if tenant is not None:
                return False
            tenant = await create_tenant(session, DEMO_TENANT)
            await scope_to_tenant(session, tenant.id)
            await create_user(
                session,
                settings,
                tenant.id,
                email=DEMO_EMAIL,
                password=DEMO_PASSWORD,
                role="admin",
            )
            return True

    created = _run(job)
    typer.echo(("Created" if created else "Found") + f" the demo tenant {DEMO_TENANT!r}.")
    sample = Path(__file__).parent / "demo" / "kb"
    counts = _run(lambda settings: _ingest_files(settings, DEMO_TENANT, _files([sample])))
    typer.echo(f"Sample knowledge base: {counts['ready'] + counts['duplicate']} documents.")
    typer.echo(
        f"\nOpen the web app at {url}/ and sign in (API docs: {url}/docs), or log in with:\n"
        f"  curl -s -X POST {url}/auth/token \\\n"
        "       -H 'content-type: application/json' \\\n"
        f'       -d \'{{"email": "{DEMO_EMAIL}", "password": "{DEMO_PASSWORD}"}}\'\n'
        f"  e-mail: {DEMO_EMAIL}   password: {DEMO_PASSWORD}   role: admin\n"
        "Then ask, e.g., 'How do I erase my data?'\n"
    )


@cli.command("chat")
def chat_command(
    url: Annotated[str, typer.Option(help="The running server.")] = "http://127.0.0.1:8000",
    email: Annotated[str | None, typer.Option(help="Log in as (asked when omitted).")] = None,
    session: Annotated[str | None, typer.Option(help="Resume this session id.")] = None,
    new: Annotated[bool, typer.Option("--new", help="Start a new session.")] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show triage, tool calls and validation.")
    ] = False,
) -> None:
    """Chat with a running server in the terminal (the password is asked, never echoed)."""
    from app.cli_chat import run_chat

    raise typer.Exit(run_chat(url, email, None, session, new, verbose))


def main() -> None:
    cli(prog_name="threadline")


if __name__ == "__main__":
    main()
