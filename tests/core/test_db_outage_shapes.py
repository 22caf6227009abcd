"""What "the database cannot be reached" looks like, from real connection attempts: each
shape must be recognised, or a turn whose answer streamed whole is stored `failed` instead of
its end-of-turn write being retried through the outage (issue 13, item 5)."""

from __future__ import annotations

import socket
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from app.core.db_outage import is_db_unavailable


async def test_a_stopped_server_behind_a_unix_socket_is_an_outage(tmp_path: Path) -> None:
    # The embedded PostgreSQL listens on a Unix socket whose file is gone while it is stopped.
    engine = create_async_engine(f"postgresql+asyncpg://app@/threadline?host={tmp_path}")
    try:
        with pytest.raises(FileNotFoundError) as caught:
            async with engine.connect() as connection:
                await connection.execute(text("SELECT 1"))
    finally:
        await engine.dispose()
    assert is_db_unavailable(caught.value)


async def test_a_refused_tcp_connection_is_an_outage() -> None:
    with socket.socket() as probe:  # a free port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    engine = create_async_engine(f"postgresql+asyncpg://app@127.0.0.1:{port}/threadline")
    try:
        with pytest.raises(ConnectionRefusedError) as caught:
            async with engine.connect() as connection:
                await connection.execute(text("SELECT 1"))
    finally:
        await engine.dispose()
    assert is_db_unavailable(caught.value)


async def test_the_checkpointers_driver_failing_to_connect_is_an_outage(tmp_path: Path) -> None:
    with pytest.raises(psycopg.OperationalError) as caught:
        await psycopg.AsyncConnection.connect(f"host={tmp_path} dbname=threadline user=app")
    assert is_db_unavailable(caught.value)


def test_an_ordinary_error_is_not_an_outage() -> None:
    assert not is_db_unavailable(ValueError("bad input"))
    assert not is_db_unavailable(FileExistsError("not a connection problem"))
