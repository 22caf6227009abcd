"""Drive the ASGI app like a server whose client can vanish at a chosen moment, and open a
second API process (another app on the same database and Redis) for cross-process tests."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.main import create_app


async def stream_until(
    app: FastAPI,
    headers: dict[str, str],
    body: dict[str, Any],
    cut: Callable[[bytes], bool],
    path: str = "/chat/stream",
) -> tuple[bytes, dict[str, str]]:
    """POST `body` and read the stream until `cut(received)` holds, then vanish. Returns what
    arrived and the response headers."""
    payload = json.dumps(body).encode()
    gone = asyncio.Event()
    chunks: list[bytes] = []
    response_headers: dict[str, str] = {}
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": payload, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            response_headers.update({k.decode().lower(): v.decode() for k, v in message["headers"]})
        if message["type"] == "http.response.body" and not gone.is_set():
            chunks.append(message.get("body", b""))
            if cut(b"".join(chunks)):
                gone.set()

    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(payload)).encode()),
            *[(k.lower().encode(), v.encode()) for k, v in headers.items()],
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("threadline.test", 80),
    }
    await asyncio.wait_for(app(scope, receive, send), timeout=30)
    return b"".join(chunks), response_headers


@asynccontextmanager
async def other_process(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession]
) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """A second API process: its own app, runs, hub and Redis connections; shared stores."""
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        application.state.resources.use_sessionmaker(sessionmaker)
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://other.test") as c:
            yield application, c
