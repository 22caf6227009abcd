"""`threadline chat` in a pseudo-terminal against a real server process (uvicorn, the test
database, Redis; the offline extractive responder, so no model at all)."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from redis.asyncio import Redis
from sqlalchemy import select as sql_select
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.core.db import scope_to_tenant
from app.models import QueryHistory
from tests.chat_helpers import add_kb_document
from tests.factories import DEFAULT_PASSWORD, make_session, make_tenant, make_user
from tests.server_process import free_port, server_env

pytestmark = pytest.mark.committed

ROOT = Path(__file__).resolve().parents[1]
REFUNDS = [
    "Damaged goods can be returned within 30 days of delivery for a full refund.",
    "Electronics have a 14 day refund window and must be unopened.",
]


@pytest.fixture
def server(settings: Settings) -> Iterator[str]:
    port = free_port()
    log = tempfile.TemporaryFile()  # noqa: SIM115 - closed below; a file, never a pipe nobody reads
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
        cwd=ROOT,
        env=server_env(settings),
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        ready: httpx.Response | None = None
        while True:
            if process.poll() is not None:
                log.seek(0)
                pytest.fail(f"the server exited: {log.read().decode(errors='replace')}")
            try:
                ready = httpx.get(f"{url}/readyz", timeout=2)
                if ready.status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"the server is not ready: {ready and ready.text}"
            time.sleep(0.2)
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


class Terminal:
    """One `threadline chat` process on a pseudo-terminal (its controlling terminal, so the
    password prompt really turns echo off)."""

    def __init__(self, *args: str) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "TERM": "dumb"}
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: become the client
            os.chdir(ROOT)
            argv = [sys.executable, "-m", "app.cli", "chat", *args]
            os.execve(sys.executable, argv, env)  # noqa: S606 - our own CLI, fixed arguments
        self.output = ""

    def expect(self, pattern: str, timeout: float = 60.0) -> str:
        """Read until `pattern` (a regex) appears in the output since the last match."""
        deadline = time.monotonic() + timeout
        while True:
            found = re.search(pattern, self.output)
            if found:
                seen, self.output = self.output[: found.end()], self.output[found.end() :]
                return seen
            left = deadline - time.monotonic()
            assert left > 0, f"timed out waiting for {pattern!r}; got {self.output!r}"
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:  # the child closed the terminal
                    chunk = b""
                assert chunk, f"the client exited waiting for {pattern!r}; got {self.output!r}"
                self.output += chunk.decode(errors="replace").replace("\r\n", "\n")

    def send(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def exit_status(self, timeout: float = 30.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                os.close(self.fd)
                return os.waitstatus_to_exitcode(status)
            try:  # keep draining, or a full terminal buffer would block the child
                if select.select([self.fd], [], [], 0.1)[0]:
                    self.output += os.read(self.fd, 4096).decode(errors="replace")
            except OSError:
                time.sleep(0.1)
        os.kill(self.pid, signal.SIGKILL)
        raise AssertionError("the client did not exit")


async def test_threadline_chat_completes_a_two_turn_conversation_in_a_terminal(
    server: str, settings: Settings, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    user = await make_user(db, tenant)
    await add_kb_document(db, tenant, "Returns policy", REFUNDS)
    existing = await make_session(db, user, title="Returns questions")

    term = Terminal("--url", server, "--email", user.email, "--verbose")
    term.expect("Password: ")
    term.send(f"{DEFAULT_PASSWORD}\n")
    assert DEFAULT_PASSWORD not in term.expect(r"Logged in to .*\n")  # not echoed
    term.expect(r"1\. Returns questions")
    term.expect("Pick a number, or press Enter for a new session: ")
    term.send("1\n")
    term.expect("Resuming 'Returns questions'.")

    term.expect("you> ")
    term.send("How long is the refund window for damaged goods?\n")
    first = term.expect("you> ")
    assert re.search(r"threadline> Extractive answer.*30 days", first)
    assert "[1] Returns policy (kb)" in first
    assert "triage: route=llm skip_llm=False" in first
    assert "guard_input: PASS" in first
    assert "validation: grounded=True" in first

    term.send("And what about electronics?\n")
    second = term.expect("you> ")
    assert "14 day refund window" in second
    assert "[" in second and "Returns policy (kb)" in second

    term.send("quit\n")
    assert term.exit_status() == 0

    # Both turns are stored in the chosen session.
    await scope_to_tenant(db, tenant.id)
    rows = (
        await db.execute(
            sql_select(QueryHistory)
            .where(QueryHistory.session_id == existing.id)
            .order_by(QueryHistory.created_at)
        )
    ).scalars()
    turns = [(r.user_query, r.status) for r in rows]
    await db.commit()
    assert turns == [
        ("How long is the refund window for damaged goods?", "complete"),
        ("And what about electronics?", "complete"),
    ]

    # Ctrl-D leaves as well, here from a resumed session id.
    again = Terminal("--url", server, "--email", user.email, "--session", str(existing.id))
    again.expect("Password: ")
    again.send(f"{DEFAULT_PASSWORD}\n")
    again.expect("you> ")
    again.send("\x04")
    assert again.exit_status() == 0

    redis = Redis.from_url(str(settings.redis_url))
    keys = [k async for k in redis.scan_iter(match=f"{settings.redis_prefix}*")]
    if keys:
        await redis.delete(*keys)
    await redis.aclose()


async def test_threadline_chat_reports_a_wrong_password_and_exits_1(server: str) -> None:
    term = Terminal("--url", server, "--email", f"nobody-{uuid.uuid4().hex[:6]}@example.com")
    term.expect("Password: ")
    term.send("wrong password\n")
    term.expect("error: 401")
    assert term.exit_status() == 1
