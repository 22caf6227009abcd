"""A conversation restricted to chosen collections (`PATCH /sessions/{id}`) never cites
outside them, over 20 turns with follow-ups and tool calls; its scope is in each turn's
manifest and the admin audit filters turns by collection (issue 30, item 5)."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI
from langchain_core.messages import BaseMessage, ToolMessage
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.db import scope_to_tenant
from app.models import KbChunk
from tests.chat_helpers import use_model
from tests.collections.world import make_world, new_session, secret_rows
from tests.fakes import ToolCall, ToolCallingChatModel

pytestmark = pytest.mark.committed

QUESTIONS = [
    "What does the cafeteria serve on Mondays?",
    "And on Fridays?",
    "When does the zephyr merger close?",
    "Who decided that?",
    "Is there lentil soup?",
]


def _search_cafeteria_once(messages: list[BaseMessage]) -> list[ToolCall] | None:
    """A model that searches the public document's words once per turn, then answers."""
    if any(isinstance(m, ToolMessage) for m in messages):
        return None
    return [("search_knowledge_base", {"query": "cafeteria lentil soup fish menu"})]


async def test_a_scoped_session_never_cites_outside_its_scope_over_twenty_turns(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    world = await make_world(client, db)
    member, admin = world.callers["member"], world.callers["admin"]
    session = await new_session(client, member)
    scoped = await client.patch(
        f"/sessions/{session}", json={"collection_ids": [world.board_id]}, headers=member.headers
    )
    assert scoped.status_code == 200, scoped.text
    assert scoped.json()["collection_ids"] == [world.board_id]
    await scope_to_tenant(db, world.tenant.id)
    board_chunks = {
        str(c)
        for c in (
            await db.execute(select(KbChunk.id).where(KbChunk.document_id == world.secret.id))
        ).scalars()
    }
    await db.commit()
    model = ToolCallingChatModel(reply=lambda _: "Here it is [1].", plan=_search_cafeteria_once)
    use_model(app, model)

    turn_ids = []
    for turn in range(20):
        answered = await client.post(
            "/chat",
            json={"session_id": session, "message": QUESTIONS[turn % len(QUESTIONS)]},
            headers=member.headers,
        )
        assert answered.status_code == 200, answered.text
        body = answered.json()
        turn_ids.append(body["turn_id"])
        manifest = body["context_metadata"]
        assert {s["source_id"] for s in body["sources"]} <= {str(world.secret.id)}, turn
        assert secret_rows(body["sources"], world, "source_id") == len(body["sources"])
        for call in manifest.get("tools", {}).get("calls", []):
            assert set(call["result_ids"]) <= board_chunks, turn
        if "access" in manifest:  # a turn that retrieved
            assert manifest["access"] == {
                "collections": [world.board_id],
                "scope": [world.board_id],
            }
    assert any("tools" in m for m in (await _manifests(client, member.headers, session)))
    assert "soup on Mondays" not in " ".join(str(m) for call in model.calls for m in call)

    audited = await client.get(
        "/admin/audit/turns",
        params={"collection_id": world.board_id, "session_id": session, "limit": 50},
        headers=admin.headers,
    )
    assert audited.status_code == 200, audited.text
    retrieved = [t for t in await _manifests(client, member.headers, session) if "access" in t]
    assert len(audited.json()["items"]) == len(retrieved) >= 10
    default = next(
        c["id"]
        for c in (await client.get("/admin/collections", headers=admin.headers)).json()["items"]
        if c["is_default"]
    )
    none = await client.get(
        "/admin/audit/turns",
        params={"collection_id": default, "session_id": session},
        headers=admin.headers,
    )
    assert none.json()["items"] == []
    log = await client.get(
        "/admin/audit/log", params={"action": "session.scope"}, headers=admin.headers
    )
    (entry,) = log.json()["items"]
    assert entry["details"] == {"before": [], "after": [world.board_id]}


async def _manifests(
    client: httpx.AsyncClient, headers: dict[str, str], session: str
) -> list[dict[str, object]]:
    turns = await client.get(f"/sessions/{session}/turns", params={"limit": 100}, headers=headers)
    return [t["context_metadata"] for t in turns.json()["items"]]


async def test_a_session_cannot_be_scoped_to_a_collection_its_user_may_not_see(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    world = await make_world(client, db)
    outsider, member = world.callers["non_member"], world.callers["member"]
    session = await new_session(client, outsider)
    refused = await client.patch(
        f"/sessions/{session}", json={"collection_ids": [world.board_id]}, headers=outsider.headers
    )
    assert refused.status_code == 404
    assert refused.json()["error"]["code"] == "collection_not_found"
    theirs = await client.patch(
        f"/sessions/{session}", json={"collection_ids": []}, headers=member.headers
    )
    assert theirs.status_code == 404
    # (A PATCH must change something: unpinning an unpinned session shows the scope as is.)
    unchanged = await client.patch(
        f"/sessions/{session}", json={"pinned": False}, headers=outsider.headers
    )
    assert unchanged.status_code == 200 and unchanged.json()["collection_ids"] == []
    picker = await client.get("/collections", headers=outsider.headers)
    assert [c["name"] for c in picker.json()["items"]] == ["General"]
    picker = await client.get("/collections", headers=member.headers)
    assert sorted(c["name"] for c in picker.json()["items"]) == ["Board room", "General"]


async def test_a_scope_with_nothing_in_it_is_recorded_and_leaves_others_their_documents(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    """A session scoped to an empty collection has nothing to search: its turn says so in
    its manifest (the scope included), and another user's turn right after it still
    searches the tenant's documents (whether a knowledge base has documents is cached per
    set of visible collections, never one user's answer for another's)."""
    world = await make_world(client, db)
    admin, outsider = world.callers["admin"], world.callers["non_member"]
    empty = await client.post(
        "/admin/collections", json={"name": "Empty", "visibility": "tenant"}, headers=admin.headers
    )
    assert empty.status_code == 201, empty.text
    scoped = await new_session(client, outsider)
    patched = await client.patch(
        f"/sessions/{scoped}",
        json={"collection_ids": [empty.json()["id"]]},
        headers=outsider.headers,
    )
    assert patched.status_code == 200, patched.text
    first = await client.post(
        "/chat",
        json={"session_id": scoped, "message": "What does the cafeteria serve?"},
        headers=outsider.headers,
    )
    assert first.status_code == 200, first.text
    manifest = first.json()["context_metadata"]
    assert manifest["access"]["scope"] == [empty.json()["id"]]
    assert first.json()["sources"] == []

    unscoped = await new_session(client, outsider)
    second = await client.post(
        "/chat",
        json={"session_id": unscoped, "message": "What does the cafeteria serve?"},
        headers=outsider.headers,
    )
    assert second.status_code == 200, second.text
    assert [s["title"] for s in second.json()["sources"]][:1] == ["Cafeteria menu"]
