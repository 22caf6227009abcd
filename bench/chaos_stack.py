"""The processes the chaos benchmark runs and breaks: an embedded PostgreSQL it can stop and
start, its own `redis-server`, a slow fake model server, and two `threadline serve` processes.

Everything listens on loopback only, and every process here is one this module started: it
is stopped by its own PID (never by name), and `Stack.close` (also registered with atexit)
stops whatever is still running and removes the temp dir.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import IO, Any

import httpx

from bench.chat_overhead import JWT_SECRET, UNLIMITED, _prepare
from bench.common import ROOT, free_port

READY_SECONDS = 180.0  # a loaded 2-core machine starts a process in 60-90 s
EXIT_SECONDS = 30.0
LOUD_LEVELS = ("warning", "error", "critical")


def _wait_port(port: int, seconds: float) -> bool:
    import socket

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.1)
    return False


class Child:
    """One subprocess of ours, with its output going to a log file."""

    def __init__(self, name: str, argv: list[str], log: Path, env: dict[str, str]) -> None:
        self.name, self.argv, self.log, self.env = name, argv, log, env
        self.process: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None

    def start(self) -> None:
        self._log_file = self.log.open("ab")
        self.process = subprocess.Popen(
            self.argv,
            cwd=ROOT,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
        )

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, sig: signal.Signals) -> None:
        if self.running:
            assert self.process is not None
            self.process.send_signal(sig)

    def wait(self, seconds: float) -> bool:
        """Whether it exited within `seconds`."""
        if self.process is None:
            return True
        try:
            self.process.wait(timeout=seconds)
            return True
        except subprocess.TimeoutExpired:
            return False

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it does not exit in time."""
        if self.running:
            self.signal(signal.SIGTERM)
            if not self.wait(EXIT_SECONDS):
                self.signal(signal.SIGKILL)
                self.wait(EXIT_SECONDS)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None


class Postgres:
    """The embedded server (pgserver), stoppable and restartable on the same data dir and
    socket directory, so the API processes' URL stays valid."""

    def __init__(self, root: Path) -> None:
        from pgserver.postgres_server import get_server

        self.server: Any = get_server(root / "pgdata", cleanup_mode="delete")
        self.server.psql("CREATE DATABASE threadline_bench;")
        self.url: str = self.server.get_uri("threadline_bench")
        self.socket_dir = Path(self.server.get_postmaster_info().socket_dir)

    def _pg_ctl(self, args: list[str]) -> None:
        from pgserver._commands import create_command_function

        pg_ctl = create_command_function("pg_ctl")
        pg_ctl(args, pgdata=self.server.pgdata, user=self.server.system_user, timeout=90)

    def stop(self, mode: str = "fast") -> None:
        """`fast`: open connections are closed, in-flight transactions abort; `immediate`: as
        a crash (no checkpoint, recovery at the next start)."""
        self._pg_ctl(["-w", "-m", mode, "stop"])

    def start(self) -> None:
        # The same options pgserver starts it with: no TCP, the same socket directory.
        self._pg_ctl(
            [
                "-w",
                "-o",
                '-h ""',
                "-o",
                f"-k {self.socket_dir}",
                "-l",
                str(self.server.log),
                "start",
            ]
        )
        from pgserver.utils import PostmasterInfo

        # pgserver stops the server at cleanup by the PID it knows: tell it the new one.
        self.server._postmaster_info = PostmasterInfo.read_from_pgdata(self.server.pgdata)

    def close(self) -> None:
        self.server.cleanup()


class Stack:
    """PostgreSQL, Redis, the fake model and two API processes, all on loopback."""

    def __init__(
        self,
        tokens: int,
        interval: float,
        keep_logs: Path | None,
        redis_port: int = 0,
        http_port_base: int = 0,
    ) -> None:
        """`redis_port` and `http_port_base` (the APIs on it and the next one, the model on
        the one after): 0 for free ports the kernel picks."""
        self.root = Path(tempfile.mkdtemp(prefix="tl-chaos-"))
        self.logs = keep_logs or self.root / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.postgres: Postgres | None = None
        self.children: list[Child] = []
        self._closed = False
        atexit.register(self.close)
        base_env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.redis_port = redis_port or free_port()
        self._http_ports = (
            [http_port_base + i for i in range(3)]
            if http_port_base
            else [free_port() for _ in range(3)]
        )
        self.redis = Child(
            "redis",
            [
                shutil.which("redis-server") or "redis-server",
                "--port",
                str(self.redis_port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.root),
            ],
            self.logs / "redis.log",
            base_env,
        )
        self.model_port = self._http_ports[2]
        self.model = Child(
            "model",
            [
                sys.executable,
                "-m",
                "bench.fake_openai",
                "--port",
                str(self.model_port),
                "--tokens",
                str(tokens),
                "--interval",
                str(interval),
            ],
            self.logs / "model.log",
            base_env,
        )
        self.children += [self.redis, self.model]
        self.apis: list[Child] = []
        self.bases: list[str] = []
        self.base_env = base_env
        self.api_env: dict[str, str] = {}

    def start(self) -> None:
        self.postgres = Postgres(self.root)
        self.redis.start()
        self.model.start()
        if not (
            _wait_port(self.redis_port, READY_SECONDS)
            and _wait_port(self.model_port, READY_SECONDS)
        ):
            raise RuntimeError(f"redis or the fake model did not start; see {self.logs}")
        asyncio.run(_prepare(self.postgres.url))
        self.api_env = env = {
            **self.base_env,
            "DATABASE_URL": self.postgres.url,
            "REDIS_URL": self.redis_url,
            "CELERY_BROKER_URL": "",
            "THREADLINE_ENV": "development",
            "THREADLINE_DATA_DIR": str(self.root / "data"),
            "THREADLINE_JWT_SECRET": JWT_SECRET,
            "THREADLINE_ACCESS_TOKEN_TTL_SECONDS": "86400",
            "THREADLINE_LLM": "openai-compatible",
            "OPENAI_BASE_URL": f"http://127.0.0.1:{self.model_port}/v1",
            "THREADLINE_LOG_LEVEL": "WARNING",
            **UNLIMITED,
        }
        threadline = str(Path(sys.executable).parent / "threadline")
        for name, port in zip(("api-a", "api-b"), self._http_ports, strict=False):
            api = Child(
                name,
                [threadline, "serve", "--host", "127.0.0.1", "--port", str(port)],
                self.logs / f"{name}.log",
                env,
            )
            self.apis.append(api)
            self.children.append(api)
            self.bases.append(f"http://127.0.0.1:{port}")
            api.start()
        for index in range(len(self.apis)):
            if not self.wait_ready(index):
                raise RuntimeError(f"{self.apis[index].name} not ready; see {self.logs}")

    def wait_ready(self, index: int) -> bool:
        """Until the API process answers /readyz with 200 (PostgreSQL and Redis reachable);
        False if it does not within READY_SECONDS (it may still serve: the bench goes on)."""
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            if not self.apis[index].running:
                raise RuntimeError(f"{self.apis[index].name} exited; see {self.logs}")
            try:
                if httpx.get(f"{self.bases[index]}/readyz", timeout=2).status_code == 200:
                    return True
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        return False

    def restart_api(self, index: int) -> bool:
        """Start a killed or stopped API process again on its port."""
        api = self.apis[index]
        api.stop()
        api.start()
        return self.wait_ready(index)

    def restart_apis(self, settings: dict[str, str]) -> None:
        """Both API processes again, with `settings` over the stack's environment (none: back
        to it)."""
        for index, api in enumerate(self.apis):
            api.env = {**self.api_env, **settings}
            if not self.restart_api(index):
                print(f"  ({api.name} not ready after {READY_SECONDS:.0f} s: going on)")

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{self.redis_port}/0"

    def log_marks(self) -> dict[Path, int]:
        """Where the API processes' logs end now (see `log_messages`)."""
        return {api.log: api.log.stat().st_size if api.log.exists() else 0 for api in self.apis}

    def log_messages(self, marks: dict[Path, int]) -> Counter[str]:
        """Warnings and errors the API processes logged since `marks`, by message."""
        found: Counter[str] = Counter()
        for path, offset in marks.items():
            with path.open("rb") as handle:
                handle.seek(offset)
                for line in handle.read().decode(errors="replace").splitlines():
                    try:
                        record = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(record, dict) and record.get("level") in LOUD_LEVELS:
                        message = str(record.get("msg")).strip().splitlines()[0][:70]
                        found[f"{record['level']}: {message}"] += 1
        return found

    def kill_redis_and_restart(self, down_seconds: float) -> None:
        self.redis.signal(signal.SIGKILL)
        self.redis.wait(EXIT_SECONDS)
        self.redis.stop()  # closes its log
        time.sleep(down_seconds)
        self.redis.start()
        _wait_port(self.redis_port, READY_SECONDS)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for child in reversed(self.children):
            try:
                child.stop()
            except Exception as exc:  # cleanup goes on
                print(f"  (could not stop {child.name}: {exc})", file=sys.stderr)
        if self.postgres is not None:
            try:
                self.postgres.close()
            except Exception as exc:
                print(f"  (could not stop PostgreSQL: {exc})", file=sys.stderr)
        shutil.rmtree(self.root, ignore_errors=True)
