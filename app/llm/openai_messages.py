"""Chat messages sent to an OpenAI-compatible API as they are, without the SDK's transform.

Before each request the `openai` SDK walks the body against its parameter types, and a chat
message against every variant of its message union: about 9 ms for a 22-message prompt on
the first token's path (measured, 2026-11-25), to change nothing, since a message whose
content is text has no field to rename or encode. `PlainMessageCompletions` sends such
messages through `extra_body` (which the SDK merges into the body after the transform) and
hands any other message (content parts: images, files, audio) to the SDK's own transform.
A streamed answer's chunks are read as dicts (app/llm/openai_stream.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from openai import AsyncOpenAI, AsyncStream
from openai.resources.chat.completions import AsyncCompletions

from app.llm.openai_stream import ChunkDicts

_PLAIN_KEYS = frozenset({"role", "content", "name", "tool_calls", "tool_call_id", "refusal"})


def is_plain(message: object) -> bool:
    """Whether the SDK's transform would leave a message as it is: a mapping of the plain
    message fields whose content is text (or absent), not a list of parts."""
    return (
        isinstance(message, Mapping)
        and message.keys() <= _PLAIN_KEYS
        and isinstance(message.get("content"), str | None)
    )


class PlainMessageCompletions(AsyncCompletions):
    """`chat.completions` of an async OpenAI client that sends text messages untransformed
    and reads a stream's chunks as dicts, ended after `silence_seconds` without one."""

    def __init__(self, client: AsyncOpenAI, *, silence_seconds: float) -> None:
        super().__init__(client)
        self.silence_seconds = silence_seconds

    async def create(self, *, messages: Iterable[Any], **params: Any) -> Any:
        """As `AsyncCompletions.create`; the messages skip the transform when all are plain,
        and a stream's chunks come as dicts (app/llm/openai_stream.py)."""
        listed = list(messages)
        if all(is_plain(m) for m in listed):
            params["extra_body"] = {**(params.pop("extra_body", None) or {}), "messages": listed}
            listed = []
        response = await super().create(messages=listed, **params)
        if isinstance(response, AsyncStream):
            return ChunkDicts(response, self.silence_seconds)
        return response
