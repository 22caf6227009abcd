"""`POST /v1/chat/completions` and `GET /v1/models`: OpenAI's protocol over Threadline's turns.

Authentication as everywhere: a Threadline API key as the bearer token (OpenAI clients send
their key so), `X-API-Key`, or a user's access token. Errors leave in OpenAI's shape
(app/openai_compat/errors.py).
"""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Header, Response
from fastapi.responses import StreamingResponse

from app.auth.principal import Caller, CurrentPrincipal
from app.conversation.endpoints.chat import IdempotencyKey
from app.conversation.streaming.sse import SSE_HEADERS
from app.core.json_types import JsonObject
from app.openai_compat import service
from app.openai_compat.conversation import (
    CHAT_ID_SCHEMA,
    CONVERSATION_HEADER,
    OPENWEBUI_CHAT_HEADER,
    client_conversation,
)
from app.openai_compat.deps import CompletionServiceDep
from app.openai_compat.schemas import ChatCompletion, CompletionRequest, ModelList, error_docs

router = APIRouter(prefix="/v1", tags=["openai"])

SESSION_HEADER = "X-Threadline-Session"
SessionHeader = Annotated[
    uuid.UUID | None,
    Header(
        alias=SESSION_HEADER,
        description="The Threadline session to continue; without it (or `metadata.session_id`) "
        "the client's conversation id names it, else a new session is opened; its id is in the "
        "response's X-Threadline-Session header.",
    ),
]
OpenWebUIChatHeader = Annotated[
    str | None,
    Header(
        alias=OPENWEBUI_CHAT_HEADER,
        description="Open WebUI's chat id (sent with ENABLE_FORWARD_USER_INFO_HEADERS=true): "
        "without a named session, every message of the chat lands in one session, derived "
        "from the id, the tenant and the user. 1-200 printable ASCII characters.",
        json_schema_extra=CHAT_ID_SCHEMA,
    ),
]
ConversationHeader = Annotated[
    str | None,
    Header(
        alias=CONVERSATION_HEADER,
        description=f"A client's conversation id, as {OPENWEBUI_CHAT_HEADER} (which is used "
        "when both are sent).",
        json_schema_extra=CHAT_ID_SCHEMA,
    ),
]
# Every error a route of this router can give, in OpenAI's shape (the shared documentation
# would otherwise add the API's own shape for the derived ones).
_ERRORS = error_docs(400, 401, 403, 404, 409, 413, 415, 422, 429, 503)
_COMPLETION_DOC: dict[int | str, JsonObject] = {
    200: {
        "description": "A `chat.completion`; with `stream: true`, Server-Sent Events: "
        "`chat.completion.chunk`s, then `data: [DONE]`.",
        "content": {
            "text/event-stream": {
                "schema": {  # each event: a chunk as JSON in `data`, or `[DONE]`
                    "type": "object",
                    "required": ["data"],
                    "properties": {"data": {"type": "string"}, "event": {"type": "string"}},
                }
            }
        },
        "headers": {
            SESSION_HEADER: {
                "description": "The session of the turn",
                "schema": {"type": "string"},
            },
            "X-Turn-Id": {"description": "The turn", "schema": {"type": "string"}},
        },
    }
}


@router.get("/models", response_model=ModelList, responses=_ERRORS)
async def list_models(principal: CurrentPrincipal) -> ModelList:
    """The models (assistants) this API answers as: one, `threadline`."""
    return service.list_models()


@router.post(
    "/chat/completions",
    response_model=ChatCompletion,
    responses={**_COMPLETION_DOC, **_ERRORS},
)
async def chat_completions(
    body: CompletionRequest,
    principal: Caller,
    completions: CompletionServiceDep,
    response: Response,
    session: SessionHeader = None,
    idempotency_key: IdempotencyKey = None,
    openwebui_chat_id: OpenWebUIChatHeader = None,
    conversation_id: ConversationHeader = None,
) -> ChatCompletion | StreamingResponse:
    """One turn of a session, as OpenAI's chat completion (streamed with `stream: true`).
    The answer keeps its `[n]` citations; `threadline.sources` says what they are."""
    # Checked even when a session is named (which wins): a malformed header is refused.
    conversation = client_conversation(openwebui_chat_id, conversation_id)
    if body.stream:
        started = await completions.stream(principal, body, session, idempotency_key, conversation)
        headers = {
            **SSE_HEADERS,
            SESSION_HEADER: str(started.session_id),
            "X-Turn-Id": str(started.turn_id),
        }
        return StreamingResponse(started.chunks, media_type="text/event-stream", headers=headers)
    answer = await completions.complete(principal, body, session, idempotency_key, conversation)
    response.headers[SESSION_HEADER] = str(answer.threadline.session_id)
    response.headers["X-Turn-Id"] = str(answer.threadline.turn_id)
    return answer
