"""A redis-server of a test's own, on a free loopback port, that the test may restart.

Tests that kill or restart Redis must never touch the shared one. This server keeps its data
across restarts (append-only file, fsync on every write), as a production Redis would, so a
test sees only what the restart does to connections. Stopped by its PID at the end.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from tests.server_process import free_port
from tests.services import require_service

_START_SECONDS = 10.0


def _command(port: int, *args: str) -> bytes:
    """One inline command on a connection of its own (so it never uses the app's pool); the
    reply's first line, or the whole of a bulk reply."""
    with socket.create_connection(("127.0.0.1", port), 1) as conn:
        conn.settimeout(1)
        conn.sendall((" ".join(args) + "\r\n").encode())
        reply = b""
        while b"\r\n" not in reply:
            chunk = conn.recv(65536)
            if not chunk:
                break
            reply += chunk
        if reply.startswith(b"$"):
            header, _, body = reply.partition(b"\r\n")
            while len(body) < int(header[1:]) + 2:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                body += chunk
            return body
        return reply


class PrivateRedis:
    def __init__(self, binary: str, options: dict[str, str] | None = None) -> None:
        self.binary = binary
        self.extra = dict(options or {})
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="tl-test-redis-"))
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        options = {"save": "", "appendonly": "yes", "appendfsync": "always", "dir": str(self.dir)}
        options.update(self.extra)
        arguments = [part for name, value in options.items() for part in (f"--{name}", value)]
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", *arguments],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + _START_SECONDS
        while not self.answers():
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError("the private redis-server did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.process = None

    def restart(self) -> None:
        """Stop and start again on the same port: every open connection dies."""
        self.stop()
        self.start()

    def answers(self) -> bool:
        try:
            return _command(self.port, "PING").startswith(b"+PONG")
        except OSError:
            return False

    def kill_clients(self) -> int:
        """Cut every client connection (CLIENT KILL): the data stays, the sockets die."""
        reply = _command(self.port, "CLIENT", "KILL", "TYPE", "normal")
        # The connection sending the command is a normal client too, and is cut last.
        return int(reply.strip()[1:] or 0) if reply.startswith(b":") else 0

    def command(self, *args: str) -> bytes:
        """One command on a connection of its own: its reply's first line (or bulk body)."""
        return _command(self.port, *args)

    def client_count(self) -> int:
        """Connections open to this server, not counting the one asking."""
        reply = _command(self.port, "CLIENT", "LIST")
        return len([line for line in reply.split(b"\n") if b"addr=" in line]) - 1


@contextlib.contextmanager
def private_redis(**options: str) -> Iterator[PrivateRedis]:
    """A started private server, stopped after; `options` are its configuration directives
    (`maxmemory="8mb"`, `maxmemory_policy="allkeys-lru"`: `_` for `-`), over the defaults.
    Without redis-server the test fails in CI and is skipped locally."""
    binary = shutil.which("redis-server")
    if binary is None:
        require_service("redis-server is not installed (a Redis the test may restart)")
    directives = {name.replace("_", "-"): value for name, value in options.items()}
    server = PrivateRedis(binary, directives)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.dir, ignore_errors=True)
