"""`threadline chat`: chat with a running server in the terminal (`app.cli.chat_client`)."""

from __future__ import annotations

from typing import Annotated

import typer


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
    from app.cli.chat_client import run_chat

    raise typer.Exit(run_chat(url, email, None, session, new, verbose))
