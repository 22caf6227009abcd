"""A `/v1` turn cut before its end (stopped, shut down, its run lost) is reported as cut:
`finish_reason` "length", which OpenAI clients show as a truncated answer, streamed or not.
A turn that ran to its end still finishes with "stop".

Here rather than in tests/openai_compat: these tests commit (and truncate after), which would
empty that package's shared world (its tenants and API keys) under the tests after them."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.db import scope_to_tenant
from app.models import QueryHistory
from tests.chat.stream_driver import stream_until
from tests.chat_helpers import use_model
from tests.factories import make_chatter
from tests.fakes import ScriptedChatModel

pytestmark = pytest.mark.committed

ANSWER = " ".join(f"word{i}" for i in range(60))
PATH = "/v1/chat/completions"


def _body(session_id: uuid.UUID, *, stream: bool) -> dict[str, Any]:
    return {
        "model": "threadline",
        "messages": [{"role": "user", "content": "Tell me everything."}],
        "stream": stream,
        "metadata": {"session_id": str(session_id)},
    }


async def _stop_when_generating(
    db: AsyncSession,
    client: httpx.AsyncClient,
    headers: dict[str, str],
    tenant_id: uuid.UUID,
    model: ScriptedChatModel,
) -> None:
    """Wait for a few tokens of the answer, then stop its turn."""
    for _ in range(1000):
        if model.tokens_generated >= 5:
            break
        await asyncio.sleep(0.01)
    await scope_to_tenant(db, tenant_id)
    turn_id = await db.scalar(select(QueryHistory.id).where(QueryHistory.status == "pending"))
    await db.commit()
    stop = await client.post(f"/chat/{turn_id}/stop", headers=headers)
    assert stop.status_code == 202, stop.text


def _chunks(raw: bytes) -> list[dict[str, Any]]:
    datas = [line[6:] for line in raw.decode().split("\n") if line.startswith("data: ")]
    assert datas[-1] == "[DONE]"
    return [json.loads(data) for data in datas[:-1]]


async def test_a_stopped_stream_finishes_with_length(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant, _user, chat, owner = await make_chatter(client, db)
    model = ScriptedChatModel(reply=lambda _: ANSWER, token_delay=0.03)
    use_model(app, model)
    streaming = asyncio.create_task(
        stream_until(app, owner.headers, _body(chat.id, stream=True), lambda _: False, PATH)
    )
    await _stop_when_generating(db, client, owner.headers, tenant.id, model)
    raw, _headers = await streaming

    chunks = _chunks(raw)
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c.get("choices")]
    assert finishes[-1] == "length"
    assert all(finish is None for finish in finishes[:-1])
    streamed = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks[:-1])
    assert 0 < len(streamed) < len(ANSWER)
    assert chunks[-1]["threadline"]["status"] == "incomplete"


async def test_a_stopped_completion_finishes_with_length(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant, _user, chat, owner = await make_chatter(client, db)
    model = ScriptedChatModel(reply=lambda _: ANSWER, token_delay=0.03)
    use_model(app, model)
    asking = asyncio.create_task(
        client.post(PATH, json=_body(chat.id, stream=False), headers=owner.headers)
    )
    await _stop_when_generating(db, client, owner.headers, tenant.id, model)
    response = await asking

    assert response.status_code == 200, response.text
    completion = response.json()
    choice = completion["choices"][0]
    assert choice["finish_reason"] == "length"
    assert completion["threadline"]["status"] == "incomplete"
    assert len(choice["message"]["content"]) < len(ANSWER)


@pytest.mark.parametrize("stream", [False, True])
async def test_an_answer_that_ran_to_its_end_finishes_with_stop(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, stream: bool
) -> None:
    _tenant, _user, chat, owner = await make_chatter(client, db)
    use_model(app, ScriptedChatModel(reply=lambda _: "All done."))
    if stream:
        raw, _headers = await stream_until(
            app, owner.headers, _body(chat.id, stream=True), lambda _: False, PATH
        )
        chunks = _chunks(raw)
        finishes = [c["choices"][0]["finish_reason"] for c in chunks if c.get("choices")]
        assert finishes[-1] == "stop"
        assert chunks[-1]["threadline"]["status"] == "complete"
    else:
        response = await client.post(PATH, json=_body(chat.id, stream=False), headers=owner.headers)
        assert response.status_code == 200, response.text
        assert response.json()["choices"][0]["finish_reason"] == "stop"
        assert response.json()["threadline"]["status"] == "complete"
