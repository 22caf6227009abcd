"""docs/integrations.md's examples, run: the `openai` SDK snippet as written, a request shaped
as Open WebUI sends one, and the MCP client configuration's url and headers."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import uuid
from urllib.parse import urlsplit

import httpx
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.openai_compat.world import World
from tests.server_process import ROOT

DOC = (ROOT / "docs" / "integrations.md").read_text()


def block(after_heading: str, language: str) -> str:
    """The first fenced block of `language` in the section under `after_heading`."""
    section = DOC.split(after_heading, 1)[1]
    found = re.search(rf"```{language}\n(.*?)```", section, re.DOTALL)
    assert found, f"no {language} block after {after_heading!r}"
    return found.group(1)


async def test_the_openai_sdk_snippet_runs_as_written(world: World) -> None:
    snippet = block("## The `openai` SDK", "python")
    env = {**os.environ, "THREADLINE_URL": world.url, "THREADLINE_API_KEY": world.a.member_key}
    before = await world.turns(world.a.tenant_id)

    ran = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", snippet],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert ran.returncode == 0, ran.stderr
    assert "14 days" in ran.stdout and "[1]" in ran.stdout
    assert "1 Refund policy" in ran.stdout  # a source, as the loop prints it
    assert "sources: ['Refund policy']" in ran.stdout  # from the stream's last chunk
    # Two turns, in one session: the second call named the first call's session.
    assert await world.turns(world.a.tenant_id) == before + 2
    in_session = await world.count(
        "SELECT count(*) FROM query_history WHERE session_id = (SELECT session_id FROM "
        "query_history WHERE tenant_id = :t AND user_query = 'Are shipping costs refunded too?' "
        "ORDER BY created_at DESC LIMIT 1)",
        t=world.a.tenant_id,
    )
    assert in_session == 2


async def test_an_open_webui_shaped_request_is_answered(world: World) -> None:
    """Open WebUI streams, resends the conversation with its own system prompt, and adds
    sampling parameters and fields of its own: all accepted, the answer from the KB."""
    body = {
        "model": "threadline",
        "stream": True,
        "temperature": 0.7,
        "top_p": 0.9,
        "max_tokens": 512,
        "user": {"name": "webui user", "id": "u-1"},
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": [{"type": "text", "text": "How long do refunds take?"}]},
        ],
    }
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
        models = await client.get(
            "/v1/models", headers={"Authorization": f"Bearer {world.a.member_key}"}
        )
        response = await client.post(
            "/v1/chat/completions",
            json=body,
            headers={"Authorization": f"Bearer {world.a.member_key}"},
        )
    assert [m["id"] for m in models.json()["data"]] == ["threadline"]
    assert response.status_code == 200, response.text
    frames = [f[6:] for f in response.text.split("\n\n") if f.startswith("data: ")]
    assert frames[-1] == "[DONE]"
    chunks = [json.loads(f) for f in frames[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert "14 days" in text and "[1]" in text


async def test_the_mcp_client_configuration_connects(world: World) -> None:
    config = json.loads(block("## An MCP client", "json"))["mcpServers"]["threadline"]
    path = urlsplit(config["url"]).path
    headers = {
        name: value.replace("tl_your_key", world.a.member_key)
        for name, value in config["headers"].items()
    }
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(world.url + path, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        tools = {tool.name for tool in (await session.list_tools()).tools}
        found = await session.call_tool("search_knowledge", {"query": "refunds"})
    assert "ask" in tools and "search_knowledge" in tools
    assert not found.is_error
    assert found.structured_content is not None
    assert found.structured_content["items"][0]["document_id"] == world.a.document_id
    assert uuid.UUID(found.structured_content["items"][0]["chunk_id"])
