"""Every path that returns knowledge-base text x {member of the group, not a member, admin,
another tenant's user}: only the member and the admin ever get the board's document, counted
in rows (issue 30, item 3)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import httpx
import pytest
from fastapi import FastAPI
from langchain_core.messages import BaseMessage, ToolMessage
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.principal import Principal
from app.conversation.service.chat import ChatService
from app.core.db import scope_to_tenant
from app.mcp_server.tools import Toolbox
from app.models import KbChunk
from tests.chat_helpers import use_model
from tests.collections.world import (
    QUESTION,
    ROLES,
    SECRET_TITLE,
    World,
    make_world,
    new_session,
    secret_rows,
)
from tests.factories import LoggedIn
from tests.fakes import ToolCall, ToolCallingChatModel

pytestmark = pytest.mark.committed

Probe = Callable[[FastAPI, httpx.AsyncClient, World, LoggedIn], Awaitable[int]]


def _toolbox(app: FastAPI, world: World, who: LoggedIn) -> Toolbox:
    resources = app.state.resources
    tenant = world.other if who is world.callers["other_tenant"] else world.tenant
    principal = Principal(who.user.id, tenant.id, who.user.email, who.user.role, "api_key")
    return Toolbox(
        principal=principal,
        chat=ChatService(
            resources.settings,
            resources.guards,
            resources.runner,
            resources.turn_context.transactions,
            resources.turn_context.embedder,
        ),
        transactions=resources.turn_context.transactions,
        settings=resources.settings,
        retriever=resources.retriever,
        redis=resources.redis,
    )


async def kb_search(app: FastAPI, client: httpx.AsyncClient, world: World, who: LoggedIn) -> int:
    found = await client.post("/kb/search", json={"query": QUESTION, "k": 5}, headers=who.headers)
    assert found.status_code == 200, found.text
    return secret_rows(found.json()["items"], world, "document_id")


async def chat(app: FastAPI, client: httpx.AsyncClient, world: World, who: LoggedIn) -> int:
    session = await new_session(client, who)
    answered = await client.post(
        "/chat", json={"session_id": session, "message": QUESTION}, headers=who.headers
    )
    assert answered.status_code == 200, answered.text
    body = answered.json()
    return secret_rows(body["sources"], world, "source_id") + (SECRET_TITLE in body["answer"])


async def v1(app: FastAPI, client: httpx.AsyncClient, world: World, who: LoggedIn) -> int:
    answered = await client.post(
        "/v1/chat/completions",
        json={"model": "threadline", "messages": [{"role": "user", "content": QUESTION}]},
        headers=who.headers,
    )
    assert answered.status_code == 200, answered.text
    return secret_rows(answered.json()["threadline"]["sources"], world, "source_id")


async def mcp_search(app: FastAPI, client: httpx.AsyncClient, world: World, who: LoggedIn) -> int:
    found = await _toolbox(app, world, who).search_knowledge(QUESTION, 5)
    return sum(1 for hit in found.items if hit.document_id == world.secret.id)


async def mcp_ask(app: FastAPI, client: httpx.AsyncClient, world: World, who: LoggedIn) -> int:
    answer = await _toolbox(app, world, who).ask(QUESTION, None)
    return sum(1 for s in answer.sources if s.source_id == str(world.secret.id))


async def replay(app: FastAPI, client: httpx.AsyncClient, world: World, who: LoggedIn) -> int:
    session = await new_session(client, who)
    await client.post(
        "/chat", json={"session_id": session, "message": QUESTION}, headers=who.headers
    )
    turns = await client.get(f"/sessions/{session}/turns", headers=who.headers)
    assert turns.status_code == 200, turns.text
    sources = [s for t in turns.json()["items"] for s in t["context_metadata"].get("sources", [])]
    return sum(1 for s in sources if s.get("title") == SECRET_TITLE)


async def export(app: FastAPI, client: httpx.AsyncClient, world: World, who: LoggedIn) -> int:
    exported = await client.get("/me/export", headers=who.headers)
    assert exported.status_code == 200, exported.text
    return exported.text.count(SECRET_TITLE)


PROBES: dict[str, Probe] = {
    "/kb/search": kb_search,
    "/chat": chat,
    "/v1/chat/completions": v1,
    "mcp search_knowledge": mcp_search,
    "mcp ask": mcp_ask,
    "replayed turns": replay,
    "export": export,
}
ALLOWED = {"member", "admin"}


async def test_only_the_groups_members_and_admins_ever_get_the_boards_document(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    world = await make_world(client, db)
    rows: dict[tuple[str, str], int] = {}
    for name, probe in PROBES.items():
        for role in ROLES:
            rows[name, role] = await probe(app, client, world, world.callers[role])
    seen = {key for key, count in rows.items() if count > 0}
    expected = {(name, role) for name in PROBES for role in ALLOWED}
    assert seen == expected, rows
    # Counted in rows: 7 paths x 4 callers, the board's document in 14 of them, never in
    # the other 14.
    assert len(rows) == 28
    assert sum(1 for (_, role), n in rows.items() if role not in ALLOWED and n) == 0


KEYED = ("/kb/search", "/chat", "/v1/chat/completions", "replayed turns", "export")
"""The paths an API key reaches over HTTP."""


async def test_an_admins_member_key_gets_no_more_than_a_member_outside_the_group(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    """A key acts with the lesser of its role and its user's: an admin's member-role key does
    not open the board's collection on any path, a chat turn's search included (ADR 0086)."""
    world = await make_world(client, db)
    admin = world.callers["admin"]
    created = await client.post(
        "/admin/api-keys", json={"name": "member key", "role": "member"}, headers=admin.headers
    )
    assert created.status_code == 201, created.text
    keyed = LoggedIn(admin.user, {"X-API-Key": created.json()["key"]}, "")
    rows = {name: await PROBES[name](app, client, world, keyed) for name in KEYED}
    assert rows == dict.fromkeys(KEYED, 0)
    # The same admin, signed in as themself, gets the document on the same path.
    assert await chat(app, client, world, admin) > 0
    # That turn is the account's: its export by the member key withholds the board's title.
    assert await export(app, client, world, keyed) == 0
    assert await export(app, client, world, admin) > 0


def _search_the_board_once(messages: list[BaseMessage]) -> list[ToolCall] | None:
    """A model that searches the board's words once per turn, then answers."""
    if any(isinstance(m, ToolMessage) for m in messages):
        return None
    return [("search_knowledge_base", {"query": "zephyr merger board closed session"})]


async def test_an_admins_member_key_gets_nothing_more_through_the_models_tool_calls(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    """The agent's searches are narrowed as the turn's retrieval is: by the credential's role,
    not the account's (an admin's member key saw every collection through a tool call)."""
    world = await make_world(client, db)
    admin = world.callers["admin"]
    created = await client.post(
        "/admin/api-keys", json={"name": "member key", "role": "member"}, headers=admin.headers
    )
    keyed = LoggedIn(admin.user, {"X-API-Key": created.json()["key"]}, "")
    use_model(app, ToolCallingChatModel(reply=lambda _: "Found [1].", plan=_search_the_board_once))
    await scope_to_tenant(db, world.tenant.id)
    query = select(KbChunk.id).where(KbChunk.document_id == world.secret.id)
    board_chunks = {str(chunk) for chunk in (await db.execute(query)).scalars()}
    await db.commit()

    searched = {}
    for who, headers in (("member key", keyed.headers), ("admin", admin.headers)):
        session = (await client.post("/sessions", headers=headers)).json()["id"]
        answered = await client.post(
            "/chat", json={"session_id": session, "message": QUESTION}, headers=headers
        )
        assert answered.status_code == 200, answered.text
        body = answered.json()
        calls = body["context_metadata"]["tools"]["calls"]
        assert [call["tool"] for call in calls] == ["search_knowledge_base"]
        found = {i for call in calls for i in call["result_ids"] or []}
        searched[who] = secret_rows(body["sources"], world, "source_id") + len(found & board_chunks)
    assert searched["member key"] == 0
    assert searched["admin"] > 0
