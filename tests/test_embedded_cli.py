"""The embedded PostgreSQL, driven through the real `threadline` CLI in separate processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from app.cli.demo import DEMO_EMAIL, DEMO_PASSWORD
from tests.server_process import free_port


@pytest.fixture
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    # A short path: PostgreSQL's Unix socket lives in it.
    path = Path(f"/tmp/tl-cli-{uuid.uuid4().hex[:8]}")
    yield path
    pgdata = path / "pgdata"
    if (pgdata / "postmaster.pid").exists():  # a failed test must not leave a server behind
        subprocess.run(["pkill", "-f", f"-D {pgdata}"], check=False)
    subprocess.run(["rm", "-rf", str(path)], check=False)


def _env(data_dir: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "REDIS_URL", "THREADLINE_ENV", "CELERY_BROKER_URL"}
    }
    env["THREADLINE_DATA_DIR"] = str(data_dir)
    env["THREADLINE_LOG_JSON"] = "false"
    env["THREADLINE_EMBEDDER"] = "hashing"  # instant, as the rest of the suite
    return env


def threadline(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        env=_env(data_dir),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _server_running(data_dir: Path) -> bool:
    return (data_dir / "pgdata" / "postmaster.pid").exists()


def _wait_until(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def test_separate_commands_share_one_embedded_database(data_dir: Path) -> None:
    created = threadline(data_dir, "tenants", "create", "acme")
    assert created.returncode == 0, created.stderr
    tenant_id = uuid.UUID(created.stdout.strip())

    user = threadline(
        data_dir,
        "users",
        "create",
        "--tenant",
        "acme",
        "--email",
        "Ann@Acme.io",
        "--password",
        "long enough",
        "--role",
        "admin",
    )
    assert user.returncode == 0, user.stderr
    uuid.UUID(user.stdout.strip())

    again = threadline(data_dir, "tenants", "create", "acme")
    assert again.returncode == 1
    assert "already exists" in again.stderr
    assert str(tenant_id) not in again.stdout

    unknown = threadline(
        data_dir,
        "users",
        "create",
        "--tenant",
        "nope",
        "--email",
        "a@b.io",
        "--password",
        "long enough",
    )
    assert unknown.returncode == 1
    assert "No tenant named 'nope'" in unknown.stderr
    assert "Traceback" not in unknown.stderr

    # Every process has exited: the last one stopped the server.
    assert not _server_running(data_dir)


def test_serve_shares_the_database_survives_a_second_serve_and_stops_cleanly(
    data_dir: Path, tmp_path: Path
) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"  # a file, never a pipe nobody reads (64 KB would freeze it)
    with log.open("wb") as stderr:
        serve = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
            env=_env(data_dir),
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        assert _wait_until(lambda: _ready(base), 60), (
            f"not ready: {log.read_text('utf-8', 'replace')}"
        )

        demo = threadline(data_dir, "demo")  # a second process, while the server runs
        assert demo.returncode == 0, demo.stderr
        assert DEMO_EMAIL in demo.stdout and DEMO_PASSWORD in demo.stdout
        token = httpx.post(
            f"{base}/auth/token", json={"email": DEMO_EMAIL, "password": DEMO_PASSWORD}
        )
        assert token.status_code == 200
        me = httpx.get(
            f"{base}/me", headers={"Authorization": f"Bearer {token.json()['access_token']}"}
        )
        assert me.json()["role"] == "admin"

        second = threadline(data_dir, "serve", "--port", str(port))
        assert second.returncode != 0  # the port is taken: it gives up ...
        assert _ready(base)  # ... without disturbing the database under the first
        assert httpx.get(f"{base}/readyz").json()["checks"]["postgres"]["status"] == "ok"

        serve.send_signal(signal.SIGTERM)
        assert serve.wait(timeout=30) == 0
        assert _wait_until(lambda: not _server_running(data_dir), 15), "postgres still running"
    finally:
        if serve.poll() is None:
            serve.kill()

    # The data survived the restart cycle.
    again = threadline(data_dir, "demo")
    assert "Found the demo tenant" in again.stdout


def _ready(base: str) -> bool:
    try:
        return httpx.get(f"{base}/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_cli_mistakes_are_messages_not_tracebacks(data_dir: Path) -> None:
    spaced = threadline(Path(f"{data_dir} with space"), "tenants", "create", "x")
    assert spaced.returncode == 1
    assert "must not contain whitespace" in spaced.stderr
    bad_role = threadline(
        data_dir,
        "api-keys",
        "create",
        "--tenant",
        "t",
        "--email",
        "e@x.io",
        "--name",
        "n",
        "--role",
        "owner",
    )
    assert bad_role.returncode == 2
    assert "role must be 'member' or 'admin'" in bad_role.stderr
    for result in (spaced, bad_role):
        assert "Traceback" not in result.stderr
