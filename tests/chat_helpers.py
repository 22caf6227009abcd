"""Helpers for chat tests: knowledge-base rows, SSE parsing, model wiring."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, create_async_engine

from app.config import Settings
from app.core.database_urls import resolve_database_urls
from app.core.db import scope_to_tenant
from app.embeddings.hashing import HashingEmbedder
from app.models import ChatSession, KbChunk, KbDocument, QueryHistory, Tenant
from tests.factories import LoggedIn
from tests.fakes import ScriptedChatModel, responder


async def add_kb_document(
    db: AsyncSession, tenant: Tenant, title: str, chunks: list[str], *, status: str = "ready"
) -> KbDocument:
    await scope_to_tenant(db, tenant.id)
    document = KbDocument(
        tenant_id=tenant.id,
        id=uuid.uuid4(),
        title=title,
        content_hash=uuid.uuid4().hex,
        status=status,
        doc_metadata={},
    )
    db.add(document)
    await db.flush()
    vectors = await HashingEmbedder().embed(chunks)
    for ordinal, (chunk, vector) in enumerate(zip(chunks, vectors, strict=True)):
        db.add(
            KbChunk(
                tenant_id=tenant.id,
                document_id=document.id,
                ordinal=ordinal,
                text=chunk,
                token_count=len(chunk.split()),
                embedding=vector,
            )
        )
    await db.commit()
    return document


def use_model(app: FastAPI, model: ScriptedChatModel) -> None:
    app.state.resources.turn_context.responder = responder(model)


@dataclass
class Event:
    id: str | None
    name: str
    data: dict[str, Any]


def parse_sse(raw: str) -> tuple[list[Event], int]:
    """The events of a stream, and how many heartbeat comments it carried."""
    events: list[Event] = []
    heartbeats = 0
    for block in raw.split("\n\n"):
        if not block.strip():
            continue
        if block.startswith(":"):
            heartbeats += 1
            continue
        fields: dict[str, str] = {}
        for line in block.splitlines():
            key, _, value = line.partition(": ")
            fields[key] = value
        if "event" not in fields:  # e.g. the `retry:` hint
            continue
        events.append(Event(fields.get("id"), fields["event"], json.loads(fields["data"])))
    return events, heartbeats


async def stream_chat(
    client: httpx.AsyncClient, headers: dict[str, str], body: dict[str, Any]
) -> tuple[httpx.Response, list[Event], int]:
    async with client.stream("POST", "/chat/stream", json=body, headers=headers) as response:
        raw = (await response.aread()).decode()
    events, heartbeats = parse_sse(raw) if response.status_code == 200 else ([], 0)
    return response, events, heartbeats


async def ask(
    client: httpx.AsyncClient,
    who: LoggedIn,
    chat: ChatSession,
    message: str,
    attachments: list[str] | None = None,
) -> httpx.Response:
    """POST /chat with one message (and attachments to add to the session)."""
    body: dict[str, Any] = {"session_id": str(chat.id), "message": message}
    if attachments:
        body["attachment_ids"] = attachments
    return await client.post("/chat", json=body, headers=who.headers)


@asynccontextmanager
async def owner_connection(settings: Settings) -> AsyncIterator[AsyncConnection]:
    """A connection as the database owner (past RLS), to assert what is really stored."""
    engine = create_async_engine(resolve_database_urls(settings).owner)
    try:
        async with engine.connect() as connection:
            yield connection
    finally:
        await engine.dispose()


async def stored_turn(db: AsyncSession, tenant_id: uuid.UUID, turn_id: str) -> QueryHistory:
    """A turn's row as committed (read fresh, not from the session's identity map)."""
    await scope_to_tenant(db, tenant_id)
    row = (
        await db.execute(
            select(QueryHistory)
            .where(QueryHistory.id == uuid.UUID(turn_id))
            .execution_options(populate_existing=True)
        )
    ).scalar_one()
    await db.commit()
    return row


async def finished_turn(db: AsyncSession, tenant_id: uuid.UUID, *where: Any) -> QueryHistory:
    """The turn matching `where` once it is no longer pending (an incomplete or failed turn
    is written by a task that outlives the request)."""
    for _ in range(100):
        await scope_to_tenant(db, tenant_id)
        turn = await db.scalar(
            select(QueryHistory).where(*where).execution_options(populate_existing=True)
        )
        await db.commit()
        if turn is not None and turn.status != "pending":
            return turn
        await asyncio.sleep(0.05)
    raise AssertionError("the turn was not finished")


async def wait_for_checkpoints(settings: Settings, session_ids: list[str]) -> None:
    """The checkpoint is written just after the answer: wait until each thread has one."""
    count = text("SELECT count(DISTINCT thread_id) FROM checkpoints WHERE thread_id = ANY(:t)")
    for _ in range(100):
        async with owner_connection(settings) as probe:
            if await probe.scalar(count, {"t": session_ids}) == len(session_ids):
                return
        await asyncio.sleep(0.05)
    raise AssertionError("checkpoints were not written")
