"""`Last-Event-ID` values that name no event: out of range is a 400; at or past the end of
a stream, the stream's terminal event comes again at once (docs/adr/0016)."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession

from tests.chat_helpers import Event, parse_sse, use_model
from tests.factories import make_chatter
from tests.fakes import ScriptedChatModel

pytestmark = pytest.mark.committed

MAX_EVENT_ID = 2**53 - 1  # the largest id the API accepts (app.conversation.streaming.resume)


async def _resume(
    client: httpx.AsyncClient, headers: dict[str, str], turn_id: str, last_id: str
) -> tuple[httpx.Response, list[Event]]:
    async def read() -> tuple[httpx.Response, str]:
        async with client.stream(
            "GET", f"/chat/{turn_id}/stream", headers={**headers, "Last-Event-ID": last_id}
        ) as response:
            return response, (await response.aread()).decode()

    # Bounded: before the fix these heartbeated for 90 s.
    response, raw = await asyncio.wait_for(read(), timeout=10)
    return response, (parse_sse(raw)[0] if response.status_code == 200 else [])


async def _finished_stream(client: httpx.AsyncClient, headers: dict[str, str], chat: str) -> str:
    async with client.stream(
        "POST", "/chat/stream", json={"session_id": chat, "message": "Refunds?"}, headers=headers
    ) as response:
        await response.aread()
        return response.headers["x-turn-id"]


@pytest.mark.parametrize("value", [str(2**64), str(2**64 + 1), str(MAX_EVENT_ID + 1)])
async def test_an_out_of_range_last_event_id_is_a_400(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, value: str
) -> None:
    _tenant, _user, chat, owner = await make_chatter(client, db)
    turn_id = await _finished_stream(client, owner.headers, str(chat.id))
    response, _ = await _resume(client, owner.headers, turn_id, value)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "last_event_id_out_of_range"


async def test_a_last_event_id_past_the_end_of_a_finished_stream_gets_its_terminal_event(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    _tenant, _user, chat, owner = await make_chatter(client, db)
    turn_id = await _finished_stream(client, owner.headers, str(chat.id))
    _, everything = await _resume(client, owner.headers, turn_id, "0")
    assert everything[-1].name == "done"
    for position in (everything[-1].id, "1000", str(MAX_EVENT_ID)):
        response, events = await _resume(client, owner.headers, turn_id, str(position))
        assert response.status_code == 200
        assert [(e.id, e.name, e.data) for e in events] == [
            (everything[-1].id, "done", everything[-1].data)
        ]


async def test_a_last_event_id_past_the_end_of_a_running_stream_gets_its_terminal_event(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    _tenant, _user, chat, owner = await make_chatter(client, db)
    model = ScriptedChatModel(reply=lambda _: "one two three four five six", token_delay=0.1)
    use_model(app, model)
    streaming = asyncio.create_task(_finished_stream(client, owner.headers, str(chat.id)))
    resumed = None
    for _ in range(300):  # as soon as the stream can be resumed, from far past its end
        if model.tokens_generated >= 1:
            resumed = asyncio.create_task(
                _resume(client, owner.headers, await _running_turn(app), "1000")
            )
            break
        await asyncio.sleep(0.01)
    assert resumed is not None
    turn_id = await streaming
    response, events = await resumed
    assert response.status_code == 200
    assert [e.name for e in events] == ["done"]
    assert events[0].data["turn_id"] == turn_id


async def _running_turn(app: FastAPI) -> str:
    runs = app.state.resources.guards.streams.runs
    assert len(runs) == 1
    return str(next(iter(runs)))
