"""The API as a real server process (`threadline serve`: uvicorn, the test database and
Redis), for tests that kill it or send it signals; and an SSE reader for its streams."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from app.config import Settings

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_env(settings: Settings, **overrides: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CELERY_BROKER_URL"}
    assert settings.database_url and settings.redis_url and settings.jwt_secret
    env.update(
        DATABASE_URL=settings.database_url,
        REDIS_URL=settings.redis_url,
        THREADLINE_ENV="test",
        THREADLINE_JWT_SECRET=settings.jwt_secret.get_secret_value(),
        THREADLINE_APP_DB_PASSWORD=settings.app_db_password.get_secret_value(),
        THREADLINE_APP_DB_ROLE=settings.app_db_role,
        THREADLINE_REDIS_PREFIX=settings.redis_prefix,
        THREADLINE_LOG_JSON="false",
        THREADLINE_LOG_LEVEL="WARNING",
        THREADLINE_EMBEDDER=settings.embedder,  # the space the test database recorded
    )
    env.update(overrides)
    return env


@dataclass
class ServerProcess:
    url: str
    process: subprocess.Popen[bytes]
    log: Path | None = None
    """Where its stderr goes: a file, never a pipe nobody reads (a full pipe would freeze the
    server the moment it logs 64 KB)."""

    def stderr(self) -> str:
        return self.log.read_text(errors="replace") if self.log and self.log.exists() else ""

    def signal(self, sig: int) -> None:
        self.process.send_signal(sig)

    def wait(self, timeout: float) -> int:
        return self.process.wait(timeout=timeout)


@contextmanager
def server_processes(settings: Settings, count: int, **env: str) -> Iterator[list[ServerProcess]]:
    """`count` `threadline serve` processes on free loopback ports, started together (their
    start-up, mostly imports, overlaps) and ready (`/readyz` 200) when yielded; each ended
    with SIGTERM (then SIGKILL) unless the test ended it already."""
    servers: list[ServerProcess] = []
    logs = Path(tempfile.mkdtemp(prefix="tl-test-serve-"))
    try:
        for _ in range(count):
            port = free_port()
            log = logs / f"{port}.log"
            with log.open("wb") as stderr:
                process = subprocess.Popen(
                    [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
                    cwd=ROOT,
                    env=server_env(settings, **env),
                    stdout=subprocess.DEVNULL,
                    stderr=stderr,
                )
            servers.append(ServerProcess(f"http://127.0.0.1:{port}", process, log))
        for server in servers:
            _wait_ready(server)
        yield servers
    finally:
        for server in servers:
            _end(server.process)
        shutil.rmtree(logs, ignore_errors=True)


def _wait_ready(server: ServerProcess) -> None:
    process = server.process
    deadline = time.monotonic() + 90
    while True:
        assert process.poll() is None, server.stderr()
        try:
            if httpx.get(f"{server.url}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "the server did not become ready"
        time.sleep(0.1)


def _end(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if process.stderr is not None:
        process.stderr.close()


@dataclass
class SseEvent:
    id: int | None
    name: str
    data: dict[str, Any]


@dataclass
class SseReader:
    """Reads events from a streaming response, block by block."""

    lines: Any
    events: list[SseEvent] = field(default_factory=list)

    async def next(self) -> SseEvent | None:
        """The next event (comments skipped); None when the stream ended."""
        fields: dict[str, str] = {}
        async for line in self.lines:
            if line == "":
                if "event" in fields:
                    raw_id = fields.get("id")
                    event = SseEvent(
                        int(raw_id) if raw_id else None,
                        fields["event"],
                        json.loads(fields.get("data", "{}")),
                    )
                    self.events.append(event)
                    return event
                fields = {}
                continue
            if line.startswith(":"):
                continue
            key, _, value = line.partition(": ")
            fields[key] = value
        return None

    def text(self) -> str:
        return "".join(e.data["text"] for e in self.events if e.name == "token")

    def last_id(self) -> int:
        return max(e.id for e in self.events if e.id is not None)
