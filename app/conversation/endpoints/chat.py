"""The chat endpoints: `/chat`, `/chat/stream`, resume and stop. Each translates HTTP to one
call of the chat service (app/conversation/service/chat.py), which owns the turn's lifecycle and its
transactions. A new turn's admission continues the transaction authentication began (the
request's), and commits it before the turn runs (ADR 0070)."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Response
from fastapi.responses import StreamingResponse

from app.auth.principal import Caller, CurrentPrincipal
from app.conversation.durability.idempotency import MAX_KEY_CHARS
from app.conversation.endpoints.deps import ChatServiceDep, refuse_a_full_follower
from app.conversation.streaming.resume import parse_last_event_id
from app.conversation.streaming.sse import SSE_HEADERS
from app.conversation.turn.schemas import ChatRequest, ChatResponse, StopResponse
from app.core.deps import DbSession
from app.core.errors import error_responses
from app.core.json_types import JsonObject

router = APIRouter(tags=["chat"])

_STREAM_DOC: dict[int | str, JsonObject] = {
    200: {
        "description": "Server-Sent Events: meta, token…, sources, done — or error.",
        "content": {
            "text/event-stream": {
                "schema": {  # each event (ADR 0006); `data` is a JSON object
                    "type": "object",
                    "required": ["event", "data"],
                    "properties": {
                        "id": {"type": "string"},
                        "event": {"type": "string"},
                        "data": {"type": "string", "contentMediaType": "application/json"},
                        "retry": {"type": "integer"},
                    },
                }
            }
        },
    }
}
# A turn: its session or attachments unknown (404), a retry of a request that failed (409),
# a rate limit or quota (429).
_TURN_ERRORS = error_responses(404, 409, 429)
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        description="Retries with this key never run twice.",
        # Checked by the idempotency store (422 `invalid_idempotency_key`).
        json_schema_extra={"maxLength": MAX_KEY_CHARS, "pattern": r"\S"},
    ),
]
# An event id; empty: from the start. Checked by `parse_last_event_id` (400).
LastEventId = Annotated[
    str, Header(alias="Last-Event-ID", json_schema_extra={"pattern": r"^\s*[0-9]{0,18}\s*$"})
]


@router.post("/chat", response_model=ChatResponse, responses=_TURN_ERRORS)
async def chat(
    body: ChatRequest,
    principal: CurrentPrincipal,
    db: DbSession,
    service: ChatServiceDep,
    idempotency_key: IdempotencyKey = None,
) -> ChatResponse:
    """One turn, answered as JSON once complete."""
    return await service.answer(principal, body, idempotency_key, begun=db)


@router.post(
    "/chat/stream",
    response_class=StreamingResponse,
    responses={**_STREAM_DOC, **_TURN_ERRORS},
)
async def chat_stream(
    body: ChatRequest,
    principal: CurrentPrincipal,
    db: DbSession,
    service: ChatServiceDep,
    idempotency_key: IdempotencyKey = None,
) -> StreamingResponse:
    """One turn, streamed as Server-Sent Events. The session is checked before the stream
    starts (404 as JSON); failures after that arrive as an `error` event. The turn id is in
    the `meta` event and the `X-Turn-Id` header, for resume and stop."""
    started = await service.stream(principal, body, idempotency_key, begun=db)
    headers = {**SSE_HEADERS, "X-Turn-Id": str(started.turn_id)}
    return StreamingResponse(started.events, media_type="text/event-stream", headers=headers)


@router.get(
    "/chat/{turn_id}/stream",
    response_class=StreamingResponse,
    responses={**_STREAM_DOC, **error_responses(400)},
)
async def resume_stream(
    turn_id: uuid.UUID,
    _not_full: Annotated[None, Depends(refuse_a_full_follower)],
    principal: Caller,
    service: ChatServiceDep,
    last_event_id: LastEventId = "",
) -> StreamingResponse:
    """Resume an interrupted stream: the events after `Last-Event-ID` (all without it), then
    the live rest. Works on any API process while the stream's buffer lasts."""
    after = parse_last_event_id(last_event_id)
    stream = await service.resume(principal, turn_id, after)
    return StreamingResponse(stream, media_type="text/event-stream", headers=SSE_HEADERS)


@router.post(
    "/chat/{turn_id}/stop",
    status_code=202,
    response_model=StopResponse,
    responses={
        200: {"model": StopResponse, "description": "Stored `incomplete` here"},
        **error_responses(409),
    },
)
async def stop_turn(
    turn_id: uuid.UUID,
    principal: Caller,
    service: ChatServiceDep,
    response: Response,
) -> StopResponse:
    """Stop a running turn (on whichever process runs it): the model call is cancelled, the
    stream ends with `done` marked `stopped`, the turn is stored `incomplete` (202). When the
    process running it is gone (its lease expired, or its channel has no listener), the turn
    is finished here, with the partial answer its stream buffer holds (200, `stopped`)."""
    stopped = await service.stop(principal, turn_id)
    if stopped.status == "stopped":
        response.status_code = 200
    return stopped
