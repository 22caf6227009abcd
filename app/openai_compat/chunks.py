"""A turn's native event stream (docs/adr/0006) as OpenAI `chat.completion.chunk`s.

The translation reads the stream `/chat/stream` sends, whichever path made it (a new run, a
retry joining the first request's buffer, a stored answer replayed), so every one of them is
translated by this one function. Order: a first chunk with the assistant's role, one chunk per
`token`, a chunk with `finish_reason` ("length" for a turn cut before its end), then (with
`stream_options.include_usage`) a chunk with the usage and no choices; the last chunk carries
the `threadline` extension (session, turn, sources). An `error` event becomes OpenAI's
in-stream error (`{"error": {...}}`), on which the `openai` SDK raises. Heartbeat comments
pass through; the stream ends with `data: [DONE]`.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from app.conversation.streaming.sse import HEARTBEAT
from app.conversation.turn.schemas import UsageOut
from app.openai_compat.errors import error_type
from app.openai_compat.schemas import MODEL_ID, CompletionUsage, finish_reason

DONE = b"data: [DONE]\n\n"
_NO_USAGE = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
_TOKEN = b'\nevent: token\ndata: {"text":'
"""A token event's fixed part (app/conversation/streaming/sse.py writes compact JSON, one event per
piece): what follows it, less the closing `}`, is the token already encoded as a JSON string."""


def _frame(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def parse_events(chunk: bytes) -> list[tuple[str, dict[str, Any]]]:
    """The (name, data) of each event in an encoded piece of the native stream; comments and
    the `retry:` hint have none."""
    events = []
    for block in chunk.split(b"\n\n"):
        name, data = "", ""
        for line in block.decode().split("\n"):
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
        if name and data:
            events.append((name, json.loads(data)))
    return events


@dataclass
class ChunkWriter:
    """Builds the chunks of one completion."""

    turn_id: uuid.UUID
    include_usage: bool
    created: int = field(default_factory=lambda: int(time.time()))
    streamed: list[bytes] = field(default_factory=list)
    """The tokens sent, each as an encoded JSON string."""
    sources: list[dict[str, Any]] = field(default_factory=list)
    _around: tuple[bytes, bytes] | None = None

    def token_frame(self, encoded: bytes) -> bytes:
        """The chunk of one token, given as an encoded JSON string: spliced into a template,
        not decoded and encoded again (the one chunk sent per token)."""
        if self._around is None:
            before, _, after = _frame(self.chunk({"content": "\x00"})).partition(b'"\\u0000"')
            self._around = (before, after)
        self.streamed.append(encoded)
        return self._around[0] + encoded + self._around[1]

    def streamed_text(self) -> str:
        """The answer as streamed so far (decoded once, at the end)."""
        return "".join(json.loads(b"[" + b",".join(self.streamed) + b"]"))

    def chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        """One chunk with one choice."""
        return {
            "id": f"chatcmpl-{self.turn_id.hex}",
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": MODEL_ID,
            "system_fingerprint": None,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }

    def ending(self, done: dict[str, Any]) -> list[dict[str, Any]]:
        """The finishing chunk, the usage chunk if asked for; the last one with the
        extension."""
        chunks = [self.chunk({}, finish_reason(done["status"]))]
        if self.include_usage:
            usage = CompletionUsage.of(UsageOut(**(done.get("usage") or _NO_USAGE))).model_dump()
            chunks.append({**self.chunk({}), "choices": [], "usage": usage})
        sources = done.get("sources", self.sources)  # a replayed answer carries its own
        extension: dict[str, Any] = {
            "session_id": done["session_id"],
            "turn_id": done["turn_id"],
            "status": done["status"],
            "sources": sources,
            "query_composition": done.get("query_composition") or "",
            "answer_model": done.get("model") or "",
        }
        if done["answer"] != self.streamed_text():
            extension["answer"] = done["answer"]
        chunks[-1]["threadline"] = extension
        return chunks


def _error(data: dict[str, Any], status: int) -> dict[str, Any]:
    return {
        "error": {
            "message": data.get("message", "The turn failed."),
            "type": error_type(status),
            "param": None,
            "code": data.get("code"),
        }
    }


async def completion_chunks(
    events: AsyncIterator[bytes], turn_id: uuid.UUID, include_usage: bool
) -> AsyncIterator[bytes]:
    """The native stream `events` of turn `turn_id`, as OpenAI chunks."""
    writer = ChunkWriter(turn_id, include_usage)
    yield _frame(writer.chunk({"role": "assistant", "content": ""}))
    async for piece in events:
        if piece == HEARTBEAT:
            yield piece
            continue
        at = piece.find(_TOKEN)
        if at >= 0 and piece.endswith(b"}\n\n") and piece.count(b"\n\n") == 1:
            yield writer.token_frame(piece[at + len(_TOKEN) : -3])
            continue
        for name, data in parse_events(piece):
            if name == "token":
                yield writer.token_frame(json.dumps(data["text"]).encode())
            elif name == "sources":
                writer.sources = data["sources"]
            elif name == "done":
                for chunk in writer.ending(data):
                    yield _frame(chunk)
            elif name == "error":
                status = 503 if data.get("code") == "server_shutdown" else 500
                yield _frame(_error(data, status))
    yield DONE
