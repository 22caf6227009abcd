from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from app.conversation.turn.events import DoneEvent, DoneExtras
from app.conversation.turn.manifest import Manifest
from app.conversation.turn.manifest_records import TriageRecord, Validation
from app.conversation.turn.types import ChatMessage, PublicSource
from app.core.json_types import NO_NUL, NOT_BLANK
from app.core.location import Location, location_of

MAX_MESSAGE_CHARS = 32_000
MAX_MESSAGES = 100
MAX_ATTACHMENTS = 20
# `message` or `messages`, never both: what `_one_conversation` checks, stated in the schema.
# (That the last of `messages` is the user's, no JSON Schema can say.)
_ONE_CONVERSATION: list[JsonValue] = [
    {
        "required": ["message"],
        "properties": {"message": {"type": "string"}, "messages": {"type": "null"}},
    },
    {
        "required": ["messages"],
        "properties": {"messages": {"type": "array"}, "message": {"type": "null"}},
    },
]


# A conversation as a client resends it: ending with the user's message.
CONVERSATION_EXAMPLE: list[JsonValue] = [
    {"role": "user", "content": "What is our refund policy?"},
    {"role": "assistant", "content": "Refunds are accepted within 30 days [1]."},
    {"role": "user", "content": "And for digital goods?"},
]


class MessageIn(BaseModel):
    """One message of a client-sent conversation."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["user", "assistant", "system"]
    content: str = Field(max_length=MAX_MESSAGE_CHARS, pattern=NO_NUL)


class ChatRequest(BaseModel):
    """Either `message` (the newest user message) or `messages` ending with the user's."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"anyOf": _ONE_CONVERSATION})

    session_id: uuid.UUID
    message: str | None = Field(default=None, max_length=MAX_MESSAGE_CHARS, pattern=NOT_BLANK)
    messages: list[MessageIn] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_MESSAGES,
        description="The whole conversation, oldest first. The last message must be the "
        "user's, with text (422 otherwise): the rule JSON Schema cannot state.",
        examples=[CONVERSATION_EXAMPLE],
    )
    attachment_ids: list[uuid.UUID] = Field(default_factory=list, max_length=MAX_ATTACHMENTS)

    @model_validator(mode="after")
    def _one_conversation(self) -> ChatRequest:
        if (self.message is None) == (self.messages is None):
            raise ValueError("send either `message` or `messages`")
        if self.message is not None and not self.message.strip():
            raise ValueError("`message` must not be empty")
        if self.messages is not None:
            if not self.messages:
                raise ValueError("`messages` must not be empty")
            last = self.messages[-1]
            if last.role != "user" or not last.content.strip():
                raise ValueError("the last of `messages` must be a non-empty user message")
        return self

    def conversation(self) -> list[ChatMessage]:
        """The request as the graph's messages."""
        if self.message is not None:
            return [ChatMessage(role="user", content=self.message)]
        assert self.messages is not None
        return [ChatMessage(role=m.role, content=m.content) for m in self.messages]


def _absent(value: object) -> bool:
    """A source's title, snippet or `withheld` left out of the wire: only a withheld source
    lacks the first two, and only it says `withheld`."""
    return value is None or value is False


class SourceOut(BaseModel):
    """A cited source as the client sees it (a snippet, not the passage)."""

    n: int
    id: str
    kind: Literal["kb", "attachment", "faq"]
    source_id: str
    title: str | None = Field(default=None, exclude_if=_absent)
    """Left out only when `withheld`."""
    score: float
    snippet: str | None = Field(default=None, exclude_if=_absent)
    """Left out only when `withheld`."""
    cited: bool
    location: Location = Field(default_factory=Location)
    """Where the passage is in its document: `{"page": 12, "page_end": 13, "section":
    "3 Refunds > 3.2 Annual plans"}`, only the keys that apply (also `slide`, `sheet`,
    `rows`, `chapter`); `{}` when unknown (a FAQ, a chunk indexed before locations)."""
    withheld: bool = Field(default=False, exclude_if=_absent)
    """Present (true) in a replayed answer (an Idempotency-Key's retry) when the caller may
    no longer see the source's document: its title and snippet are left out, as in the
    turns listing (ADR 0078, 0087)."""


class UsageOut(BaseModel):
    """The turn's token usage."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cached_prompt_tokens: int = 0
    """Of `prompt_tokens`, those the provider read from its prompt cache (billed lower)."""


class ChatResponse(BaseModel):
    """A `/chat` answer (also what an idempotent retry gets back)."""

    session_id: uuid.UUID
    turn_id: uuid.UUID
    status: str
    answer: str
    sources: list[SourceOut]
    query_composition: str
    context_metadata: Manifest
    usage: UsageOut
    model: str
    latency_ms: int | None
    triage: TriageRecord | None = None
    """{route, skip_llm, log}: what the input guardrail and triage decided."""
    validation: Validation | None = None
    """{sources: {grounded, confidence, issues}, output_guardrail: {safe, issues}}."""
    stopped: bool = False
    """True when the turn was stopped on request (then `status` is `incomplete`)."""

    @classmethod
    def of(cls, done: DoneEvent, sources: Sequence[PublicSource]) -> ChatResponse:
        """The `/chat` answer of a turn's `done` and its (public) sources: what the endpoint
        returns, what an idempotent retry gets back and what its stream replays. A `done`
        read back from the turn's row carries the stored sources, which win."""
        usage, extras, metadata = done.usage, done.extras, done.context_metadata
        sources = extras.get("sources", sources)
        prompt, completion = (
            int(usage.get("prompt_tokens", 0)),
            int(usage.get("completion_tokens", 0)),
        )
        return cls(
            session_id=done.session_id,
            turn_id=done.turn_id,
            status=done.status,
            answer=done.answer,
            sources=[SourceOut.model_validate(s) for s in sources],
            query_composition=done.query_composition or "",
            context_metadata=metadata,
            usage=UsageOut(
                prompt_tokens=prompt,
                completion_tokens=completion,
                total_tokens=int(usage.get("total_tokens", prompt + completion)),
                cached_prompt_tokens=int(usage.get("cached_prompt_tokens", 0) or 0),
            ),
            model=extras.get("model") or "",
            latency_ms=extras.get("latency_ms"),
            triage=metadata.triage,
            validation=metadata.validation,
            stopped=bool(extras.get("stopped")),
        )

    def done_event(self) -> DoneEvent:
        """The `done` of this stored answer, for a retried stream (its sources ride along)."""
        return DoneEvent(
            turn_id=self.turn_id,
            session_id=self.session_id,
            status=self.status,
            answer=self.answer,
            query_composition=self.query_composition,
            usage=self.usage.model_dump(),
            context_metadata=self.context_metadata,
            extras=DoneExtras(
                sources=[cast(PublicSource, s.model_dump(mode="json")) for s in self.sources],
                model=self.model,
                latency_ms=self.latency_ms,
                stopped=self.stopped,
            ),
        )


class StopResponse(BaseModel):
    """What a stop request did."""

    turn_id: uuid.UUID
    status: Literal["stopping", "stopped"]
    """`stopping` (202): the running process ends it; `stopped` (200): no process received
    the stop, so the turn was stored `incomplete` directly."""


def public_source(source: Mapping[str, Any], cited: Collection[int]) -> PublicSource:
    """A source as the client sees it (`SourceOut`), from a turn's source or its manifest
    entry (both hold `n`, `id`, `kind`, `source_id`, `title`, `score`, `snippet`)."""
    return PublicSource(
        n=source["n"],
        id=source["id"],
        kind=source["kind"],
        source_id=source["source_id"],
        title=source["title"],
        score=round(float(source["score"]), 6),
        snippet=source["snippet"],
        cited=source["n"] in cited,
        location=location_of(source.get("location")),
    )
