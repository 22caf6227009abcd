"""Attachments: processed, kept in the session for later turns, private to their owner,
deleted with everything derived from them."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import event, func, select
from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.db import scope_to_tenant
from app.ingestion.uploads import display_name
from app.models import Attachment, AttachmentChunk, SessionAttachment
from tests.chat_helpers import ask
from tests.factories import LoggedIn, login, make_session, make_tenant, make_user
from tests.knowledge.files import CORRUPT_PDF, make_pdf

pytestmark = pytest.mark.committed

CONTRACT = make_pdf(
    "Supply contract between Acme and Initech.",
    "The notice period for termination is ninety days.",
    "Invoices are payable within thirty days.",
)


async def _attach(
    app: FastAPI, client: httpx.AsyncClient, who: LoggedIn, name: str, data: bytes
) -> str:
    response = await client.post("/attachments", files={"file": (name, data)}, headers=who.headers)
    assert response.status_code == 201, response.text
    await app.state.resources.jobs.drain()
    return str(response.json()["id"])


async def test_an_attachment_is_still_seen_three_turns_later(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    user = await make_user(db, await make_tenant(db))
    owner = await login(client, user)
    chat = await make_session(db, user)
    attachment = await _attach(app, client, owner, "contract.pdf", CONTRACT)
    first = await ask(client, owner, chat, "I attached our contract.", [attachment])
    assert first.status_code == 200, first.text
    assert first.json()["context_metadata"]["active_attachment_ids"] == [attachment]
    await ask(client, owner, chat, "hello again")
    await ask(client, owner, chat, "thanks")
    fourth = await ask(client, owner, chat, "What is the notice period for termination?")
    body = fourth.json()
    assert body["query_composition"] == "pure_doc"
    assert body["sources"][0]["kind"] == "attachment"
    assert body["sources"][0]["source_id"] == attachment
    assert "ninety days" in body["answer"]

    listed = await client.get(f"/sessions/{chat.id}/attachments", headers=owner.headers)
    assert [a["id"] for a in listed.json()["items"]] == [attachment]
    removed = await client.delete(
        f"/sessions/{chat.id}/attachments/{attachment}", headers=owner.headers
    )
    assert removed.status_code == 204
    after = await ask(client, owner, chat, "What is the notice period for termination?")
    assert after.json()["sources"] == []


async def test_attachments_are_private_to_their_owner(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    owner = await login(client, await make_user(db, tenant))
    attachment = await _attach(app, client, owner, "notes.txt", b"Private notes about salaries.")
    for stranger_user in (await make_user(db, tenant), await make_user(db, await make_tenant(db))):
        stranger = await login(client, stranger_user)
        chat = await make_session(db, stranger_user)
        assert (
            await client.get(f"/attachments/{attachment}", headers=stranger.headers)
        ).status_code == 404
        assert (
            await client.delete(f"/attachments/{attachment}", headers=stranger.headers)
        ).status_code == 404
        put = await client.put(
            f"/sessions/{chat.id}/attachments/{attachment}", headers=stranger.headers
        )
        assert put.status_code == 404
        used = await ask(client, stranger, chat, "salaries?", [attachment])
        assert used.status_code == 404
        assert used.json()["error"]["code"] == "attachment_not_found"
    assert (
        await client.get(f"/attachments/{attachment}", headers=owner.headers)
    ).status_code == 200


async def test_deleting_an_attachment_removes_its_chunks_and_session_links(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    user = await make_user(db, await make_tenant(db))
    owner = await login(client, user)
    chat = await make_session(db, user)
    attachment = await _attach(app, client, owner, "a.txt", b"The pilot runs in Lisbon until June.")
    put = await client.put(f"/sessions/{chat.id}/attachments/{attachment}", headers=owner.headers)
    assert put.status_code == 204
    assert (
        await client.delete(f"/attachments/{attachment}", headers=owner.headers)
    ).status_code == 204
    await scope_to_tenant(db, user.tenant_id)
    chunks = await db.scalar(select(func.count()).select_from(AttachmentChunk))
    links = await db.scalar(select(func.count()).select_from(SessionAttachment))
    await db.commit()
    assert (chunks, links) == (0, 0)


async def test_attachment_text_is_anonymised(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    owner = await login(client, await make_user(db, await make_tenant(db)))
    attachment = await _attach(
        app,
        client,
        owner,
        "cv.txt",
        b"Contact Maria at maria.verdi@example.com or +39 333 765 4321.",
    )
    details = (await client.get(f"/attachments/{attachment}", headers=owner.headers)).json()
    assert details["status"] == "ready"
    assert details["ingestion"]["pii_replaced"] == {"EMAIL": 1, "PHONE": 1}
    await scope_to_tenant(db, owner.user.tenant_id)
    stored = await db.scalar(select(Attachment.text))
    chunks = list(await db.scalars(select(AttachmentChunk.text)))
    await db.commit()
    for text in (stored or "", *chunks):
        assert "maria.verdi@example.com" not in text
        assert "765 4321" not in text
    assert stored == "Contact Maria at [EMAIL] or [PHONE]."


async def test_a_failed_attachment_is_a_clear_error_when_used(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    user = await make_user(db, await make_tenant(db))
    owner = await login(client, user)
    chat = await make_session(db, user)
    attachment = await _attach(app, client, owner, "broken.pdf", CORRUPT_PDF)
    response = await ask(client, owner, chat, "summarise it", [attachment])
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "attachment_failed"


async def test_a_turn_waits_for_processing_up_to_the_limit(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    user = await make_user(db, await make_tenant(db))
    owner = await login(client, user)
    chat = await make_session(db, user)
    resources = app.state.resources
    resources.turn_context.settings = resources.turn_context.settings.model_copy(
        update={"attachment_wait_seconds": 0.3}
    )
    submitted = resources.jobs.submit
    resources.jobs.submit = lambda job: None  # the worker never picks it up
    try:
        response = await client.post(
            "/attachments",
            files={"file": ("slow.txt", b"Waiting for a worker.")},
            headers=owner.headers,
        )
    finally:
        resources.jobs.submit = submitted
    turn = await ask(client, owner, chat, "read it", [response.json()["id"]])
    assert turn.status_code == 409
    assert turn.json()["error"]["code"] == "attachment_not_ready"


async def test_showing_attachments_never_reads_their_text(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    """An attachment's text may be 30 M characters: listing a session's attachments or
    showing one reads their status, never that text."""
    user = await make_user(db, await make_tenant(db))
    owner = await login(client, user)
    chat = await make_session(db, user)
    attachment = await _attach(app, client, owner, "contract.pdf", CONTRACT)
    link = f"/sessions/{chat.id}/attachments/{attachment}"
    linked = await client.put(link, headers=owner.headers)
    assert linked.status_code == 204, linked.text
    statements: list[str] = []

    def seen(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement)

    event.listen(Engine, "before_cursor_execute", seen)
    try:
        listed = await client.get(f"/sessions/{chat.id}/attachments", headers=owner.headers)
        shown = await client.get(f"/attachments/{attachment}", headers=owner.headers)
    finally:
        event.remove(Engine, "before_cursor_execute", seen)
    assert [a["id"] for a in listed.json()["items"]] == [attachment]
    assert shown.json()["status"] == "ready"
    reads = [s for s in statements if "FROM attachments" in s]
    assert reads and not any("attachments.text" in s for s in reads), reads


async def test_an_uploads_name_is_shown_without_path_or_hidden_characters(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    """The name becomes the source's title in prompts, exports and the web app: no path, no
    control or direction-changing characters (`\u202e` makes "exe.txt" read "txt.exe")."""
    owner = await login(client, await make_user(db, await make_tenant(db)))
    named = {
        "../../etc/passwd\u202etxt.exe": "passwdtxt.exe",
        "C:\\Users\\me\\minutes  2026.txt": "minutes 2026.txt",
    }
    for sent, shown in named.items():
        content = f"Notes filed as {shown}.".encode()
        attachment = await _attach(app, client, owner, sent, content)
        found = await client.get(f"/attachments/{attachment}", headers=owner.headers)
        assert found.json()["filename"] == shown, sent
    # What an HTTP client would percent-encode, a raw multipart body can carry.
    assert display_name("minutes\t2026\x07.txt") == "minutes 2026.txt"
    assert display_name("\x00\x1b") is None
