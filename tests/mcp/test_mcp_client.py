"""The official `mcp` client session against `/mcp` of the running API: the tools and their
schemas, tenancy, `ask` stored as a turn and audited, the admin-only audit, and tool calls
with wrong arguments refused with nothing stored."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from tests.openai_compat.world import World

TOOLS = {"search_knowledge", "ask", "list_sessions", "get_session_turns", "audit_turn"}


@asynccontextmanager
async def mcp_session(world: World, key: str, modern: bool = False) -> AsyncIterator[ClientSession]:
    """A client session as docs/integrations.md configures one: the API key as bearer.
    `modern`: the 2026-07-28 protocol (`server/discover`, no handshake), else the
    `initialize` handshake most clients still use."""
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(f"{world.url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        if modern:
            await session.discover()
        else:
            await session.initialize()
        yield session


def payload(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    found: dict[str, Any] | None = result.structured_content
    assert found is not None
    return found


def error_text(result: CallToolResult) -> str:
    assert result.is_error
    return " ".join(getattr(part, "text", "") for part in result.content)


async def test_lists_its_tools_with_precise_schemas(world: World) -> None:
    async with mcp_session(world, world.a.admin_key) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}

    assert set(tools) == TOOLS
    search = tools["search_knowledge"].input_schema
    assert search["required"] == ["query"]
    assert search["properties"]["k"]["minimum"] == 1
    assert search["properties"]["k"]["maximum"] == 50
    ask = tools["ask"].input_schema
    assert ask["required"] == ["question"]
    assert "uuid" in json.dumps(ask["properties"]["session_id"])
    for tool in tools.values():
        assert tool.description and len(tool.description) > 40
        assert tool.output_schema is not None


@pytest.mark.parametrize("modern", [False, True])
async def test_search_knowledge_returns_only_the_callers_tenants_passages(
    world: World, modern: bool
) -> None:
    async with mcp_session(world, world.a.member_key, modern) as session:
        found = payload(await session.call_tool("search_knowledge", {"query": "refunds", "k": 10}))

    documents = {item["document_id"] for item in found["items"]}
    assert documents == {world.a.document_id}  # tenant b's refund document is never seen
    assert all(isinstance(item["score"], float) for item in found["items"])
    assert "14 days" in found["items"][0]["snippet"]


async def test_ask_stores_a_turn_seen_in_the_session_and_in_the_admin_audit(
    world: World,
) -> None:
    async with mcp_session(world, world.a.admin_key) as session:
        answer = payload(await session.call_tool("ask", {"question": "How long do refunds take?"}))
        assert "14 days" in answer["answer"] and "[1]" in answer["answer"]
        assert answer["sources"][0]["source_id"] == world.a.document_id
        again = payload(
            await session.call_tool(
                "ask", {"question": "And shipping costs?", "session_id": answer["session_id"]}
            )
        )
        assert again["session_id"] == answer["session_id"]
        turns = payload(
            await session.call_tool("get_session_turns", {"session_id": answer["session_id"]})
        )
        sessions = payload(await session.call_tool("list_sessions", {"limit": 100}))
        audited = payload(await session.call_tool("audit_turn", {"turn_id": answer["turn_id"]}))

    # Through the HTTP API, the same turns.
    headers = {"X-API-Key": world.a.admin_key}
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
        listed = await client.get(f"/sessions/{answer['session_id']}/turns", headers=headers)
        audit = await client.get(
            "/admin/audit/turns", params={"session_id": answer["session_id"]}, headers=headers
        )
        log = await client.get(
            "/admin/audit/log", params={"action": "audit.turn.read"}, headers=headers
        )
    assert listed.status_code == 200
    http_turns = [t["id"] for t in listed.json()["items"]]
    assert http_turns == [again["turn_id"], answer["turn_id"]]
    assert [t["id"] for t in turns["items"]] == http_turns
    assert answer["session_id"] in {s["id"] for s in sessions["items"]}
    assert [t["turn_id"] for t in audit.json()["items"]] == http_turns  # in the admin audit
    # The audit record has the turn's context manifest, and the read was logged.
    assert audited["turn_id"] == answer["turn_id"]
    assert audited["user_query"] == "How long do refunds take?"
    assert "history_turns_included" in audited["context_metadata"]  # the budget's manifest
    assert log.status_code == 200
    assert f"turns/{answer['turn_id']}" in {e["resource"] for e in log.json()["items"]}


async def test_a_members_key_cannot_audit_a_turn(world: World) -> None:
    async with mcp_session(world, world.a.admin_key) as session:
        answer = payload(await session.call_tool("ask", {"question": "Refunds?"}))
    reads = await world.count(
        "SELECT count(*) FROM audit_log WHERE tenant_id = :t", t=world.a.tenant_id
    )

    async with mcp_session(world, world.a.member_key) as session:
        result = await session.call_tool("audit_turn", {"turn_id": answer["turn_id"]})

    assert "admin_required" in error_text(result)
    assert (
        await world.count(
            "SELECT count(*) FROM audit_log WHERE tenant_id = :t", t=world.a.tenant_id
        )
        == reads
    )


async def test_another_tenants_session_and_turn_are_not_found(world: World) -> None:
    async with mcp_session(world, world.b.admin_key) as session:
        theirs = payload(await session.call_tool("ask", {"question": "Refunds?"}))
    before = await world.turns(world.a.tenant_id)

    async with mcp_session(world, world.a.admin_key) as session:
        turns = await session.call_tool("get_session_turns", {"session_id": theirs["session_id"]})
        ask = await session.call_tool(
            "ask", {"question": "Refunds?", "session_id": theirs["session_id"]}
        )
        audit = await session.call_tool("audit_turn", {"turn_id": theirs["turn_id"]})

    assert "session_not_found" in error_text(turns)
    assert "session_not_found" in error_text(ask)
    assert "turn_not_found" in error_text(audit)
    assert await world.turns(world.a.tenant_id) == before


async def test_wrong_argument_types_are_a_tool_error_and_store_nothing(world: World) -> None:
    turns = await world.turns(world.a.tenant_id)
    sessions = await world.sessions(world.a.tenant_id)
    calls: list[tuple[str, dict[str, Any]]] = [
        ("ask", {"question": 42}),
        ("ask", {"question": "Refunds?", "session_id": "not-a-uuid"}),
        ("ask", {"question": "   "}),
        ("ask", {"question": "x" * 40_000}),
        ("search_knowledge", {"query": "refunds", "k": "many"}),
        ("search_knowledge", {"query": "refunds", "k": 500}),
        ("get_session_turns", {"session_id": 7}),
        ("audit_turn", {}),
    ]
    async with mcp_session(world, world.a.admin_key) as session:
        for name, arguments in calls:
            result = await session.call_tool(name, arguments)
            assert result.is_error, (name, arguments)
            assert error_text(result), (name, arguments)

    assert await world.turns(world.a.tenant_id) == turns
    assert await world.sessions(world.a.tenant_id) == sessions


async def test_an_argument_error_names_the_field_not_the_value(world: World) -> None:
    secret = "sk-live-" + "7" * 30
    async with mcp_session(world, world.a.admin_key) as session:
        huge = await session.call_tool("search_knowledge", {"query": "refunds", "k": 10**30})
        typed = await session.call_tool("get_session_turns", {"session_id": secret})
    assert "k:" in error_text(huge) and str(10**30) not in error_text(huge)
    assert "session_id:" in error_text(typed) and secret not in error_text(typed)


async def test_a_nul_character_in_a_tool_argument_is_invalid_data(world: World) -> None:
    async with mcp_session(world, world.a.admin_key) as session:
        search = await session.call_tool("search_knowledge", {"query": "refunds\u0000policy"})
    assert "invalid_data" in error_text(search)


async def test_get_is_405_not_a_stream_that_never_answers(world: World) -> None:
    headers = {"X-API-Key": world.a.member_key, "Accept": "text/event-stream"}
    async with httpx.AsyncClient(base_url=world.url, timeout=10) as client:
        response = await client.get("/mcp", headers=headers)
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"
    assert set(response.headers["allow"].split(", ")) == {"POST", "DELETE"}


async def test_mcp_needs_an_api_key(world: World) -> None:
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
        missing = await client.post("/mcp", json=request)
        wrong = await client.post(
            "/mcp", json=request, headers={"Authorization": "Bearer tl_not-a-key"}
        )
    assert missing.status_code == 401 and missing.json()["error"]["code"] == "api_key_required"
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "invalid_api_key"


async def test_x_api_key_works_too(world: World) -> None:
    headers = {"X-API-Key": world.b.member_key}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(f"{world.url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        found = payload(await session.call_tool("search_knowledge", {"query": "refunds"}))
    assert {item["document_id"] for item in found["items"]} == {world.b.document_id}
