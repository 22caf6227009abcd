"""An Idempotency-Key replays its answer only while the answer's turn exists."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession

from tests.chat_helpers import stream_chat, use_model
from tests.factories import make_chatter, make_session
from tests.fakes import ScriptedChatModel

pytestmark = pytest.mark.committed


@pytest.mark.parametrize("endpoint", ["/chat", "/chat/stream"])
async def test_after_the_session_is_deleted_its_answers_are_not_replayed(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, endpoint: str
) -> None:
    _tenant, user, chat, owner = await make_chatter(client, db)
    model = ScriptedChatModel(reply=lambda _: "a private answer")
    use_model(app, model)
    body = {"session_id": str(chat.id), "message": "remember this"}
    headers = {**owner.headers, "Idempotency-Key": "delete-me"}
    if endpoint == "/chat":
        first = await client.post("/chat", json=body, headers=headers)
        assert first.status_code == 200
        replay = await client.post("/chat", json=body, headers=headers)
        assert replay.json()["turn_id"] == first.json()["turn_id"]  # replayed while it exists
    else:
        response, events, _ = await stream_chat(client, headers, body)
        assert response.status_code == 200
        assert events[-1].name == "done"
    assert len(model.answer_prompts()) == 1

    assert (await client.delete(f"/sessions/{chat.id}", headers=owner.headers)).status_code == 204

    if endpoint == "/chat":
        after = await client.post("/chat", json=body, headers=headers)
        assert after.status_code == 404, after.text
        assert after.json()["error"]["code"] == "session_not_found"
    else:
        after, events, _ = await stream_chat(client, headers, body)
        assert after.status_code == 404
        assert events == []
    assert len(model.answer_prompts()) == 1

    # The key is free again: a request in another session runs with it (no stale 422).
    fresh = await make_session(db, user)
    renewed = {"session_id": str(fresh.id), "message": "remember this"}
    again = await client.post("/chat", json=renewed, headers=headers)
    assert again.status_code == 200, again.text
    assert again.json()["session_id"] == str(fresh.id)
    assert len(model.answer_prompts()) == 2
