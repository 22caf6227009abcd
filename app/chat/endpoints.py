from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from app.auth.principal import CurrentPrincipal
from app.chat.schemas import ChatRequest, ChatResponse, SourceOut
from app.chat.service import prepare_turn
from app.chat.sse import SSE_HEADERS, event_stream
from app.core.deps import DbSession, ResourcesDep
from app.core.errors import AppError

router = APIRouter(tags=["chat"])

_STREAM_DOC: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Server-Sent Events: meta, token…, sources, done — or error.",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    }
}


@router.post("/chat", response_model=ChatResponse)
async def chat(
    body: ChatRequest, principal: CurrentPrincipal, session: DbSession, resources: ResourcesDep
) -> ChatResponse:
    """One turn, answered as JSON once complete."""
    turn = await prepare_turn(session, principal, body, resources.settings)
    await session.commit()  # release the connection: the pipeline uses its own transactions
    done: dict[str, Any] | None = None
    sources: list[dict[str, Any]] = []
    async for event in resources.runner.run(turn):
        if event.name == "error":
            raise AppError.of(event.status_code, event.data["code"], event.data["message"])
        if event.name == "sources":
            sources = event.data["sources"]
        if event.name == "done":
            done = event.data
    if done is None:
        raise AppError("The turn ended without an answer.")
    return ChatResponse(
        session_id=turn.session_id,
        turn_id=turn.turn_id,
        status=done["status"],
        answer=done["answer"],
        sources=[SourceOut(**s) for s in sources],
        query_composition=done["query_composition"],
        context_metadata=done["context_metadata"],
        usage=done["usage"],
        model=done["model"],
        latency_ms=done["latency_ms"],
        triage=done["triage"],
        validation=done["validation"],
    )


@router.post("/chat/stream", response_class=StreamingResponse, responses=_STREAM_DOC)
async def chat_stream(
    body: ChatRequest, principal: CurrentPrincipal, session: DbSession, resources: ResourcesDep
) -> StreamingResponse:
    """One turn, streamed as Server-Sent Events. The session is checked before the stream
    starts (404 as JSON); failures after that arrive as an `error` event."""
    turn = await prepare_turn(session, principal, body, resources.settings)
    await session.commit()
    stream = event_stream(resources.runner.run(turn), resources.settings.sse_heartbeat_seconds)
    return StreamingResponse(stream, media_type="text/event-stream", headers=SSE_HEADERS)
