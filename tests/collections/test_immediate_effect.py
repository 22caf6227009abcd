"""Changes of groups and collection scopes apply to the very next request (issue 30, item 4):
no permission is cached beyond a request, not even by a warm history cache; a turn keeps its
stored sources, but a replay or an export withholds the titles the user lost, and says so."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession

from tests.collections.world import QUESTION, SECRET_TITLE, make_world, new_session, secret_rows

pytestmark = pytest.mark.committed


async def test_a_member_removed_from_the_group_cannot_cite_the_document_at_the_next_chat(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    world = await make_world(client, db)
    member, admin = world.callers["member"], world.callers["admin"]
    session = await new_session(client, member)
    first = await client.post(
        "/chat", json={"session_id": session, "message": QUESTION}, headers=member.headers
    )
    assert first.status_code == 200, first.text
    assert secret_rows(first.json()["sources"], world, "source_id") >= 1
    assert world.board_id in first.json()["context_metadata"]["access"]["collections"]

    removed = await client.delete(
        f"/admin/groups/{world.group_id}/members/{member.user.id}", headers=admin.headers
    )
    assert removed.status_code == 204, removed.text

    # The history cache is warm with the first turn; the follow-up retrieves again, and the
    # previous answer's citations are re-read under the new permissions.
    follow_up = await client.post(
        "/chat",
        json={"session_id": session, "message": "And who decided on the zephyr merger?"},
        headers=member.headers,
    )
    assert follow_up.status_code == 200, follow_up.text
    body = follow_up.json()
    # Nothing of the board's document is a source any more. (The conversation's own earlier
    # answer stays in its history: the user was shown it, and it is theirs.)
    assert secret_rows(body["sources"], world, "source_id") == 0
    assert not any(
        p.get("kind") == "kb" and p.get("title") == SECRET_TITLE
        for p in body["context_metadata"].get("sources", [])
    )
    assert world.board_id not in body["context_metadata"]["access"]["collections"]
    searched = await client.post(
        "/kb/search", json={"query": QUESTION, "k": 5}, headers=member.headers
    )
    assert secret_rows(searched.json()["items"], world, "document_id") == 0

    # The replay withholds the first turn's source of the board's document, and says so.
    turns = await client.get(f"/sessions/{session}/turns", headers=member.headers)
    oldest = turns.json()["items"][-1]["context_metadata"]
    hidden = [s for s in oldest["sources"] if s.get("withheld")]
    assert hidden and all("title" not in s and "snippet" not in s for s in hidden)
    assert oldest["access"]["withheld_sources"] == [s["n"] for s in hidden]
    assert SECRET_TITLE not in turns.text
    exported = await client.get("/me/export", headers=member.headers)
    assert exported.status_code == 200
    assert SECRET_TITLE not in exported.text and '"withheld_sources"' in exported.text
    assert exported.json()["groups"] == []
    # The admin's audit of the turn still has the stored record, unchanged.
    audited = await client.get(
        f"/admin/audit/turns/{first.json()['turn_id']}", headers=admin.headers
    )
    assert audited.status_code == 200 and SECRET_TITLE in audited.text


async def test_re_scoping_a_collection_applies_to_the_next_search(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    world = await make_world(client, db)
    outsider, admin = world.callers["non_member"], world.callers["admin"]

    async def outsider_sees() -> int:
        found = await client.post(
            "/kb/search", json={"query": QUESTION, "k": 5}, headers=outsider.headers
        )
        return secret_rows(found.json()["items"], world, "document_id")

    assert await outsider_sees() == 0
    opened = await client.patch(
        f"/admin/collections/{world.board_id}", json={"visibility": "tenant"}, headers=admin.headers
    )
    assert opened.status_code == 200, opened.text
    assert await outsider_sees() >= 1
    closed = await client.patch(
        f"/admin/collections/{world.board_id}", json={"visibility": "groups"}, headers=admin.headers
    )
    assert closed.status_code == 200
    assert await outsider_sees() == 0
    added = await client.post(
        f"/admin/groups/{world.group_id}/members",
        json={"user_id": str(outsider.user.id)},
        headers=admin.headers,
    )
    assert added.status_code == 201
    assert await outsider_sees() >= 1
