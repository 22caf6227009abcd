"""A slow reader of `/chat/stream` and the RSS sampler, shared by bench/slow_readers.py and the
chaos benchmark's `slow-readers` phase (issue 31, item 10; ADR 0083)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from dataclasses import dataclass, field

import psutil

SAMPLE_EVERY = 0.25


@dataclass
class Rss:
    """The resident memory of one or more server processes (summed), sampled in the
    background."""

    processes: list[psutil.Process]
    samples: list[tuple[float, int]] = field(default_factory=list)

    def now(self) -> int:
        rss = sum(int(p.memory_info().rss) for p in self.processes)
        self.samples.append((time.monotonic(), rss))
        return rss

    def peak_since(self, since: float) -> int:
        return max((rss for at, rss in self.samples if at >= since), default=0)


async def sample(rss: Rss, stop: asyncio.Event) -> None:
    """Sample `rss` every SAMPLE_EVERY s until `stop`."""
    while not stop.is_set():
        rss.now()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), SAMPLE_EVERY)


def _request(port: int, token: str, session_id: str) -> bytes:
    body = f'{{"session_id":"{session_id}","message":"Tell me everything, slowly."}}'.encode()
    head = (
        f"POST /chat/stream HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


async def slow_reader(
    port: int, token: str, session_id: str, rate: int, rcvbuf: int, stop: asyncio.Event
) -> int:
    """Start a turn and read it `rate` bytes a second off a `rcvbuf`-byte receive buffer until
    the server closes or `stop`; then close abruptly. Returns the bytes read."""
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # Before connect, so the window the server sees is small from the start.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.setblocking(False)
    received = 0
    try:
        await loop.sock_connect(sock, ("127.0.0.1", port))
        await loop.sock_sendall(sock, _request(port, token, session_id))
        step = max(1, rate // 8)
        while not stop.is_set():
            chunk = await asyncio.wait_for(loop.sock_recv(sock, step), 30)
            if not chunk:
                break
            received += len(chunk)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), step / rate)
    except (OSError, TimeoutError):
        pass
    finally:
        # An abrupt close (RST): what a phone that lost its network looks like to the server.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        sock.close()
    return received
