"""The OpenAI chat-completions wire format, as far as Threadline speaks it (docs/api.md).

Requests take what OpenAI clients send: parameters Threadline does not use (temperature,
max_tokens, tools...) are accepted and ignored, since the assistant's own configuration decides
them. Responses add one extension field, `threadline` (docs/adr/0038-openai-and-mcp-faces.md).
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, StrictBool, model_validator

from app.conversation.turn.schemas import (
    CONVERSATION_EXAMPLE,
    MAX_MESSAGE_CHARS,
    SourceOut,
    UsageOut,
)
from app.core.json_types import NO_NUL

MODEL_ID = "threadline"
"""The one model (assistant) Threadline offers for now."""
MODEL_CREATED = 1_763_942_400  # 2025-11-24: a fixed date, so /v1/models is stable
MAX_CLIENT_MESSAGES = 1000
"""A resent conversation may be long; only its recent part reaches the turn (the service)."""
MAX_CONTENT_PARTS = 100

TextContent = Annotated[str, Field(max_length=MAX_MESSAGE_CHARS, pattern=NO_NUL)]


class TextPart(BaseModel):
    """A text part of a message's content (no images or audio: Threadline answers text)."""

    type: Literal["text"]
    text: TextContent


class CompletionMessage(BaseModel):
    """One message of the conversation the client sends. Other fields (`name`, `tool_calls`,
    ...) are ignored; so are system, developer and tool messages (Threadline's own
    instructions and tools apply)."""

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: TextContent | list[TextPart] | None = Field(
        default=None, json_schema_extra={"maxItems": MAX_CONTENT_PARTS}
    )

    @model_validator(mode="after")
    def _bounded(self) -> CompletionMessage:
        if isinstance(self.content, list):
            if len(self.content) > MAX_CONTENT_PARTS:
                raise ValueError(f"at most {MAX_CONTENT_PARTS} content parts")
            if len(self.text()) > MAX_MESSAGE_CHARS:
                raise ValueError(f"a message holds at most {MAX_MESSAGE_CHARS} characters")
        return self

    def text(self) -> str:
        """The message's text (its text parts joined)."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(part.text for part in self.content)


class StreamOptions(BaseModel):
    """Options of a streamed completion."""

    include_usage: StrictBool = False
    """Send the turn's token usage in a last chunk (with no choices)."""


class CompletionRequest(BaseModel):
    """`POST /v1/chat/completions`: the conversation, ending with the user's message."""

    model: str = Field(
        min_length=1,
        max_length=200,
        description="`threadline` (GET /v1/models); another is a 404 `model_not_found`.",
        json_schema_extra={"enum": [MODEL_ID]},
    )
    messages: list[CompletionMessage] = Field(
        min_length=1,
        max_length=MAX_CLIENT_MESSAGES,
        description="The conversation, oldest first. The last message must be the user's, "
        "with text (400 otherwise, as OpenAI's API): the rule JSON Schema cannot state.",
        examples=[CONVERSATION_EXAMPLE],
    )
    # Strict, as OpenAI's API: `"stream": "yes"` is a 400, not a guess.
    stream: StrictBool | None = False
    stream_options: StreamOptions | None = None
    metadata: (
        dict[
            Annotated[str, Field(pattern=NO_NUL)],
            Annotated[str, Field(max_length=512, pattern=NO_NUL)],
        ]
        | None
    ) = Field(
        default=None,
        max_length=16,
        description="`session_id`: the Threadline session to continue (as the "
        "X-Threadline-Session header).",
    )
    n: int | None = Field(default=None, ge=1, le=1, description="One choice only.")

    @model_validator(mode="after")
    def _ends_with_user(self) -> CompletionRequest:
        last = self.messages[-1] if self.messages else None
        if last is None or last.role != "user" or not last.text().strip():
            raise ValueError("the last message must be a non-empty user message")
        return self


class AssistantMessage(BaseModel):
    """The answer, with its `[n]` citations."""

    role: Literal["assistant"] = "assistant"
    content: str
    refusal: None = None


FinishReason = Literal["stop", "length"]


def finish_reason(status: str) -> FinishReason:
    """OpenAI's `finish_reason` for a turn of this status: "length" for an answer cut before
    its end (`incomplete`: stopped, shut down, its run lost), which OpenAI clients show as
    truncated; "stop" for one that ran to its end (docs/adr/0044)."""
    return "length" if status == "incomplete" else "stop"


class Choice(BaseModel):
    """The one choice of a completion."""

    index: int = 0
    message: AssistantMessage
    finish_reason: FinishReason
    logprobs: None = None


class ThreadlineExtension(BaseModel):
    """What OpenAI's format has no field for: the session and turn, and the cited sources."""

    session_id: uuid.UUID
    turn_id: uuid.UUID
    status: str
    """`complete`, or `incomplete` for a stopped turn."""
    sources: list[SourceOut]
    """The passages the answer's `[n]` refer to (`n`)."""
    query_composition: str
    answer_model: str
    """The model behind the assistant that wrote the answer. (In a stream, `answer` is added
    when the output checks changed the answer after its tokens were sent: the stored one.)"""


class PromptTokensDetails(BaseModel):
    """OpenAI's breakdown of the prompt tokens."""

    cached_tokens: int = 0
    """Prompt tokens the provider read from its prompt cache (billed lower)."""


class CompletionUsage(BaseModel):
    """A turn's token usage in OpenAI's shape (`usage.cached_prompt_tokens` of `/chat` is
    `prompt_tokens_details.cached_tokens` here)."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails

    @classmethod
    def of(cls, usage: UsageOut) -> CompletionUsage:
        """The OpenAI shape of a `/chat` usage record."""
        return cls(
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            total_tokens=usage.total_tokens,
            prompt_tokens_details=PromptTokensDetails(cached_tokens=usage.cached_prompt_tokens),
        )


class ChatCompletion(BaseModel):
    """A whole completion (`stream` false)."""

    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: CompletionUsage
    system_fingerprint: None = None
    threadline: ThreadlineExtension


class ModelCard(BaseModel):
    """One model, as `GET /v1/models` lists it."""

    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str


class ModelList(BaseModel):
    """`GET /v1/models`: one model per configured assistant."""

    object: Literal["list"] = "list"
    data: list[ModelCard]


class OpenAIErrorDetail(BaseModel):
    """An error as OpenAI clients read it; `code` is Threadline's stable code."""

    message: str
    type: str
    param: str | None
    code: str | None


class OpenAIErrorResponse(BaseModel):
    """The body of every error response under /v1."""

    error: OpenAIErrorDetail


def error_docs(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` for these statuses, with OpenAI's error shape."""
    return {
        status: {"model": OpenAIErrorResponse, "description": "Error (OpenAI's error shape)"}
        for status in statuses
    }
