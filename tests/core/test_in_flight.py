"""One credential's burst is refused at the door (issue 33: 300 resumes of one stream by
one member queued every other request behind their authentication: `/healthz` p95 1.1 s)."""

from __future__ import annotations

import asyncio

import httpx
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from app.core.in_flight import InFlightPerCredentialMiddleware
from tests.chat.stream_driver import stream_until
from tests.chat_helpers import use_model
from tests.factories import make_chatter
from tests.fakes import ScriptedChatModel

LIMIT = 3


def _held_app() -> tuple[InFlightPerCredentialMiddleware, asyncio.Event, list[str]]:
    """An app whose requests wait for `release`; `entered` lists who got in."""
    release, entered = asyncio.Event(), []

    async def held(request: Request) -> PlainTextResponse:
        entered.append(request.headers.get("authorization", "anonymous"))
        await release.wait()
        return PlainTextResponse("ok")

    inner = Starlette(routes=[Route("/held", held)])
    return InFlightPerCredentialMiddleware(inner, limit=LIMIT), release, entered


async def test_past_the_limit_a_credential_is_refused_and_others_are_not() -> None:
    gate, release, entered = _held_app()
    transport = httpx.ASGITransport(app=gate)
    async with httpx.AsyncClient(transport=transport, base_url="http://t.test") as client:
        member = {"Authorization": "Bearer member-token"}
        other = {"Authorization": "Bearer other-token"}
        held = [asyncio.create_task(client.get("/held", headers=member)) for _ in range(LIMIT)]
        for _ in range(100):
            if len(entered) == LIMIT:
                break
            await asyncio.sleep(0.01)
        assert gate.in_flight() == LIMIT

        refused = await client.get("/held", headers=member)
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "too_many_in_flight"
        assert refused.headers["retry-after"] == "1"
        # Another credential, and a request without one, are not counted with it.
        others = [
            asyncio.create_task(client.get("/held", headers=other)),
            asyncio.create_task(client.get("/held")),
        ]
        for _ in range(100):
            if len(entered) == LIMIT + 2:
                break
            await asyncio.sleep(0.01)
        assert sorted(entered[LIMIT:]) == ["Bearer other-token", "anonymous"]

        release.set()
        assert [r.status_code for r in await asyncio.gather(*held, *others)] == [200] * 5
        assert gate.in_flight() == 0  # the places are given back
        assert (await client.get("/held", headers=member)).status_code == 200


def _gate_of(app: FastAPI) -> InFlightPerCredentialMiddleware:
    layer = app.middleware_stack
    while not isinstance(layer, InFlightPerCredentialMiddleware):
        layer = layer.app  # type: ignore[union-attr]
    return layer


async def test_the_api_refuses_a_burst_before_authenticating_it(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    """Through the whole application, with a bound of 1: while a member's stream runs, their
    next request is refused; another member's is answered; after the stream, theirs is."""
    _tenant, _user, chat, owner = await make_chatter(client, db)
    _other_tenant, _other, _other_chat, other = await make_chatter(client, db)
    model = ScriptedChatModel(reply=lambda _: "one two three four five", token_delay=0.1)
    use_model(app, model)
    gate = _gate_of(app)
    gate.limit = 1
    body = {"session_id": str(chat.id), "message": "Go"}
    streaming = asyncio.create_task(stream_until(app, owner.headers, body, lambda _: False))
    for _ in range(200):
        if model.tokens_generated >= 1:
            break
        await asyncio.sleep(0.02)
    assert gate.in_flight() == 1

    refused = await client.get("/sessions", headers=owner.headers)
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "too_many_in_flight"
    assert (await client.get("/sessions", headers=other.headers)).status_code == 200

    raw, _headers = await streaming
    assert b"event: done" in raw
    assert (await client.get("/sessions", headers=owner.headers)).status_code == 200
