"""The `threadline` command: serve, migrate, manage tenants, users and API keys, ingest,
reindex and chat. One module per group of commands; this one assembles them (`main` is the
entry point of pyproject's `threadline` script and of `python -m app.cli`).

Modules import what a command needs when it runs, so `threadline --help` and `threadline
chat` start without loading the database, the models or the pipeline.
"""

from __future__ import annotations

import typer

from app.cli import accounts, chat, demo, indexes, ingest, reindex, server

cli = typer.Typer(
    name="threadline",
    help="Threadline: multi-tenant RAG chat platform.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
cli.command()(server.serve)
cli.command()(server.migrate)
cli.command()(server.downgrade)
cli.add_typer(accounts.tenants_cli, name="tenants")
cli.add_typer(accounts.users_cli, name="users")
cli.add_typer(accounts.api_keys_cli, name="api-keys")
cli.command("ingest")(ingest.ingest_command)
cli.command("reindex")(reindex.reindex_command)
cli.command("index-tenants")(indexes.index_tenants_command)
cli.command()(demo.demo)
cli.command("chat")(chat.chat_command)


def main() -> None:
    """Run the `threadline` command."""
    cli(prog_name="threadline")
