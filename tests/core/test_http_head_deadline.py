"""A client that sends its request head a byte at a time is cut off (issue 33, item 10):
`threadline serve` runs uvicorn with `HeadDeadlineProtocol`, which closes a connection whose
request line and headers are not complete within the deadline; a normal request, and a
keep-alive connection's next one, are served as before."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn

from app.cli import http_protocol
from app.cli.http_protocol import HeadDeadlineProtocol

DEADLINE = 0.5


async def _hello(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]}
    )
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture
async def server(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[int]:
    monkeypatch.setattr(http_protocol, "header_timeout", lambda: DEADLINE)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    config = uvicorn.Config(
        _hello, host="127.0.0.1", port=port, http=HeadDeadlineProtocol, log_level="warning"
    )
    running = uvicorn.Server(config)
    task = asyncio.create_task(running.serve())
    for _ in range(500):  # bounded: uvicorn has no "started" event to wait on
        if running.started:
            break
        await asyncio.sleep(0.01)
    yield port
    running.should_exit = True
    await asyncio.wait_for(task, 10)


async def _closed_after(reader: asyncio.StreamReader) -> float:
    started = time.monotonic()
    assert await asyncio.wait_for(reader.read(), 10) == b""  # closed, nothing answered
    return time.monotonic() - started


async def test_a_head_sent_a_byte_at_a_time_is_cut_off_at_the_deadline(server: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server)
    head = b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200

    async def trickle() -> None:
        for byte in head:
            writer.write(bytes([byte]))
            await asyncio.sleep(0.05)

    trickling = asyncio.create_task(trickle())
    try:
        waited = await _closed_after(reader)
    finally:
        trickling.cancel()
        writer.close()
    assert DEADLINE * 0.8 <= waited <= DEADLINE * 6


async def test_a_silent_connection_is_cut_off_too(server: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server)
    waited = await _closed_after(reader)
    writer.close()
    assert waited <= DEADLINE * 6


async def test_normal_requests_on_one_connection_are_served(server: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server)
    for _ in range(3):
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        status = await asyncio.wait_for(reader.readline(), 5)
        assert status.startswith(b"HTTP/1.1 200")
        await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert await reader.readexactly(2) == b"ok"
        await asyncio.sleep(DEADLINE * 1.5)  # idle between requests: keep-alive's, not ours
    writer.close()


def test_serve_runs_uvicorn_with_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from app import cli
    from app.cli import server as serve_module
    from app.config import Settings

    seen: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda *a, **kw: seen.update(kw))
    monkeypatch.setattr(
        serve_module, "get_settings", lambda: Settings(database_url="postgresql://x/y")
    )
    result = CliRunner().invoke(cli.cli, ["serve"])
    assert result.exit_code == 0, result.output
    assert seen["http"] is HeadDeadlineProtocol
