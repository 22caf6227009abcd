"""Tracing against a local stand-in for LangSmith: what arrives, and that nothing does when
tracing is off."""

from __future__ import annotations

import asyncio
import gzip
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.main import create_app
from app.observability.tracing import Tracing
from tests.factories import make_chatter

pytestmark = pytest.mark.committed

EMAIL = "jane.doe@example.com"
PHONE = "+39 333 123 4567"
IBAN = "GB82WEST12345698765432"


class Recorder(BaseHTTPRequestHandler):
    received: list[tuple[str, str, bytes]]

    def _record(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        if self.headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        self.received.append((self.command, self.path, body))
        payload = b'{"version": "0.0.0"}' if self.path.endswith("/info") else b"{}"
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PATCH = _record

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def langsmith_stand_in() -> Iterator[tuple[str, list[tuple[str, str, bytes]]]]:
    received: list[tuple[str, str, bytes]] = []
    handler = type("Handler", (Recorder,), {"received": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", received
    server.shutdown()


async def _chat(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession], db: AsyncSession
) -> tuple[dict[str, Any], Any]:
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        application.state.resources.use_sessionmaker(sessionmaker)
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://t.test") as client:
            _tenant, user, chat, owner = await make_chatter(client, db)
            response = await client.post(
                "/chat",
                json={
                    "session_id": str(chat.id),
                    "message": f"Please mail {EMAIL} the guide, call {PHONE}, pay to {IBAN}",
                },
                headers=owner.headers,
            )
            assert response.status_code == 200, response.text
            tracing = application.state.resources.runner.tracing
            if tracing is not None:
                await asyncio.to_thread(tracing.client.flush)
            return response.json(), (user, tracing)


async def test_a_traced_turn_is_one_run_tree_with_a_child_per_node_and_no_pii(
    settings: Settings,
    sessionmaker: async_sessionmaker[AsyncSession],
    db: AsyncSession,
    langsmith_stand_in: tuple[str, list[tuple[str, str, bytes]]],
) -> None:
    endpoint, received = langsmith_stand_in
    traced = settings.model_copy(
        update={
            "langsmith_tracing": True,
            "langsmith_api_key": SecretStr("ls-test-key"),
            "langsmith_endpoint": endpoint,
        }
    )
    answer, (user, tracing) = await _chat(traced, sessionmaker, db)
    assert isinstance(tracing, Tracing)
    for _ in range(100):
        runs = _runs(received)
        if any(r.get("name") == "chat_turn" and r.get("end_time") for r in runs.values()):
            break
        await asyncio.sleep(0.05)
    raw = b"".join(body for _, _, body in received)
    assert EMAIL.encode() not in raw
    assert PHONE.encode() not in raw and PHONE.replace(" ", "").encode() not in raw
    assert IBAN.encode() not in raw
    assert b"[PHONE]" in raw and b"[IBAN]" in raw  # the message was traced, anonymized
    assert str(user.id).encode() not in raw  # only the pseudonym
    runs = _runs(received)
    roots = [r for r in runs.values() if r.get("name") == "chat_turn"]
    assert len(roots) == 1
    root = roots[0]
    metadata = root["extra"]["metadata"]
    assert metadata["session_id"] == answer["session_id"]
    assert metadata["tenant_id"]
    assert metadata["user"] == tracing.pseudonym(str(user.id))
    children = {r["name"] for r in runs.values() if r.get("parent_run_id") == root["id"]}
    assert {"validate", "retrieve", "generate", "persist"} <= children


def _runs(received: list[tuple[str, str, bytes]]) -> dict[str, dict[str, Any]]:
    """Runs by id, merging creation (POST /runs) and update (PATCH /runs/{id}) bodies."""
    runs: dict[str, dict[str, Any]] = {}
    for _method, path, body in received:
        if not path.startswith("/runs") or not body:
            continue
        data = json.loads(body)
        run_id = data.get("id") or path.rsplit("/", 1)[-1]
        runs.setdefault(run_id, {}).update(data)
    return runs


async def test_with_tracing_unset_nothing_is_sent(
    settings: Settings,
    sessionmaker: async_sessionmaker[AsyncSession],
    db: AsyncSession,
    langsmith_stand_in: tuple[str, list[tuple[str, str, bytes]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    endpoint, received = langsmith_stand_in
    # The ambient variables LangChain reads on its own point at the stand-in too.
    monkeypatch.setenv("LANGSMITH_TRACING", "true")
    monkeypatch.setenv("LANGSMITH_ENDPOINT", endpoint)
    monkeypatch.setenv("LANGSMITH_API_KEY", "ls-test-key")
    untraced = settings.model_copy(update={"langsmith_endpoint": endpoint})
    _, (_user, tracing) = await _chat(untraced, sessionmaker, db)
    assert tracing is None
    await asyncio.sleep(0.5)
    assert received == []
