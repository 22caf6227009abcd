"""GET /me/export: one JSON document with every row that references the user."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import MutableMapping
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.core.db import scope_to_tenant
from tests.chat_helpers import add_kb_document
from tests.factories import login, make_session, make_tenant, make_user
from tests.privacy.helpers import make_footprint, tables_naming

pytestmark = pytest.mark.committed

# Where each table's rows appear in the export (the audit log's in two sections: reads of
# the user's data, and the user's own actions).
EXPORTED = {
    "users": ("user",),
    "chat_sessions": ("sessions",),
    "query_history": ("turns",),
    "attachments": ("attachments",),
    "session_attachments": ("session_attachments",),
    "api_keys": ("api_keys",),
    "audit_log": ("admin_reads", "audit_actions"),
    "refresh_token_families": ("logins",),
    "kb_documents": ("kb_documents_added",),
    "turn_feedback": ("feedback",),
}
# Rows that name the user but are not personal data of their own: chunks repeat the
# attachment's exported text, checkpoints repeat exported turns.
DERIVED = {
    "attachment_chunks",
    "checkpoints",
    "checkpoint_blobs",
    "checkpoint_writes",
}


async def test_the_export_holds_every_row_that_references_the_user(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, settings: Settings
) -> None:
    tenant = await make_tenant(db)
    me = await make_footprint(app, client, db, settings, tenant, role="admin")
    admin = await login(client, await make_user(db, tenant, role="admin"))
    read = await client.get(f"/admin/audit/turns/{me.turn_ids[0]}", headers=admin.headers)
    assert read.status_code == 200
    other = await make_footprint(app, client, db, settings, tenant)
    # The user, an admin, read someone's turn and added a knowledge-base document.
    assert (
        await client.get(f"/admin/audit/turns/{other.turn_ids[0]}", headers=me.owner.headers)
    ).status_code == 200
    document = await add_kb_document(db, tenant, "Handbook by me", ["Parking is free."])
    document.created_by = me.user.id
    await db.commit()
    # Listings not filtered by user read this user's turns too (with the other user's).
    for params in ({}, {"session_id": str(me.sessions[0].id)}):
        listed = await client.get("/admin/audit/turns", params=params, headers=admin.headers)
        assert listed.status_code == 200

    response = await client.get("/me/export", headers=me.owner.headers)

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert "attachment" in response.headers["content-disposition"]
    export = response.json()
    assert export["format_version"] == 1
    assert export["generated_at"]
    assert export["user"]["id"] == str(me.user.id)
    assert export["user"]["email"] == me.user.email
    assert {s["id"] for s in export["sessions"]} == {str(s.id) for s in me.sessions}
    assert [t["id"] for t in export["turns"]] == me.turn_ids
    for turn in export["turns"]:
        assert turn["context_metadata"]["query_composition"] == turn["query_composition"]
        assert "quality_score" in turn["context_metadata"]
    (attachment,) = export["attachments"]
    assert attachment["id"] == me.attachment_id
    assert "ninety days" in attachment["text"]
    assert len(export["api_keys"]) == 1
    assert [r["action"] for r in export["admin_reads"]] == [
        "audit.turn.read",
        "audit.turns.list",
        "audit.turns.list",
    ]
    assert {r["actor_user_id"] for r in export["admin_reads"]} == {str(admin.user.id)}

    assert [a["action"] for a in export["audit_actions"]] == ["audit.turn.read"]
    assert set(export["audit_actions"][0]) == {"id", "action", "created_at"}
    assert len(export["logins"]) >= 1
    assert {"id", "created_at", "expires_at", "revoked_at"} == set(export["logins"][0])
    assert [d["title"] for d in export["kb_documents_added"]] == ["Handbook by me"]
    assert [(f["turn_id"], f["value"], f["comment"]) for f in export["feedback"]] == [
        (me.turn_ids[0], "down", "It missed the notice clause.")
    ]

    naming = await tables_naming(settings, me.ids())
    assert set(naming) <= set(EXPORTED) | DERIVED, "a table holds user data the export misses"
    for table, sections in EXPORTED.items():
        rows = 0
        for section in sections:
            exported = export[section]
            rows += 1 if isinstance(exported, dict) else len(exported)
        assert naming.get(table, 0) == rows, table
        assert rows, f"the test leaves no {table} row to export"
    assert not (json.dumps(export).count(str(other.user.id)))  # and nobody else's data


async def test_a_long_history_is_streamed_whole_in_batches(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    app.state.resources.settings = app.state.resources.settings.model_copy(
        update={"export_batch_rows": 7}
    )
    user = await make_user(db, await make_tenant(db))
    chat = await make_session(db, user)
    await scope_to_tenant(db, user.tenant_id)
    await db.execute(
        text(
            "INSERT INTO query_history (tenant_id, id, session_id, user_id, user_query, answer, "
            "status, context_metadata) SELECT :t, gen_random_uuid(), :s, :u, 'q' || i, "
            "'a \"quoted\" ' || i, 'complete', jsonb_build_object('n', i) "
            "FROM generate_series(1, 250) i"
        ),
        {"t": user.tenant_id, "s": chat.id, "u": user.id},
    )
    await db.commit()
    owner = await login(client, user)

    async with client.stream("GET", "/me/export", headers=owner.headers) as response:
        assert response.headers["content-encoding"] == "gzip"  # compressed on the wire
        pieces = [piece async for piece in response.aiter_bytes()]

    export = json.loads(b"".join(pieces))
    assert [t["context_metadata"]["n"] for t in export["turns"]] == list(range(1, 251))
    assert export["turns"][0]["answer"] == 'a "quoted" 1'
    assert uuid.UUID(export["turns"][0]["session_id"]) == chat.id
    assert export["attachments"] == []


async def test_exports_beyond_the_per_process_cap_get_429_until_one_ends(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    app.state.resources.settings = app.state.resources.settings.model_copy(
        update={"export_max_concurrent": 1, "export_batch_rows": 1}
    )
    user = await make_user(db, await make_tenant(db))
    owner = await login(client, user)
    first_chunk, resume = asyncio.Event(), asyncio.Event()

    requested = False

    async def receive() -> dict[str, Any]:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.Event().wait()  # the client never goes away on its own
        raise AssertionError("unreachable")

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.body" and not first_chunk.is_set():
            first_chunk.set()
            await resume.wait()  # a slow client: the export stays open

    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/me/export",
        "raw_path": b"/me/export",
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in owner.headers.items()],
        "client": ("127.0.0.1", 1),
        "server": ("test", 80),
    }
    slow = asyncio.create_task(app(scope, receive, send))
    try:
        await asyncio.wait_for(first_chunk.wait(), 10)
        busy = await client.get("/me/export", headers=owner.headers)
    finally:  # the open export holds a transaction: let it end whatever happens
        resume.set()
        await asyncio.wait_for(slow, 10)
    assert busy.status_code == 429
    assert busy.json()["error"]["code"] == "export_busy"
    assert int(busy.headers["retry-after"]) > 0
    assert (await client.get("/me/export", headers=owner.headers)).status_code == 200
