"""A streamed chat completion read as plain dicts, straight off its Server-Sent Events.

The `openai` SDK turns every streamed chunk into a pydantic `ChatCompletionChunk` (its SSE
decoder and `construct_type`), and LangChain's `ChatOpenAI` turns each one straight back into
a dict (`model_dump`) before it reads it. Together they cost about 0.4 ms of CPU a chunk,
most of a streamed answer's model-call cost (issue 32, `bench.turn_floor`). `ChunkDicts` keeps the
SDK for everything else (the request, its retries, status errors, timeouts) and only reads
the body: one `json.loads` a chunk, which `ChatOpenAI` takes as it is, since it converts a
chunk only when it is not a dict already.

What the SDK's stream does and this keeps: `data:` lines joined until a blank line make one
event; comments (`:`), `event:`, `id:` and `retry:` lines carry nothing a chat completion
reads; `[DONE]` ends the stream and the rest of the body is read so the connection goes back
to the pool; a chunk carrying `error` raises `openai.APIError`; a timeout or a broken
connection mid-stream raises `APITimeoutError` or `APIConnectionError`.

And what LangChain's `stream_chunk_timeout` did, without its cost (it wraps every chunk's
wait in `asyncio.wait_for`, a task a chunk: 3.5 ms of a 40-chunk call): a stream whose
server sends only keepalive comments for `silence_seconds` raises `APITimeoutError`. A
stream that sends nothing at all is ended by the client's read timeout.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any

import anyio
import httpx2  # the openai SDK's own transport
import openai

_DONE = "[DONE]"


class ChunkDicts:
    """The chunks of a streamed completion as dicts; an async context manager that closes
    the response, like the SDK's `AsyncStream`."""

    def __init__(self, stream: openai.AsyncStream[Any], silence_seconds: float) -> None:
        self.response = stream.response
        self.silence_seconds = silence_seconds

    async def __aenter__(self) -> ChunkDicts:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self.response.aclose()

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[dict[str, Any]]:
        request = self.response.request
        done = False
        try:
            async for data in _events(self.response.aiter_lines(), self.silence_seconds):
                # After [DONE] the rest of the body is still read: the pool reuses the
                # connection only once its response is read to the end.
                done = done or data.startswith(_DONE)
                if done:
                    continue
                chunk = json.loads(data)
                if isinstance(chunk, dict) and chunk.get("error"):
                    error = chunk["error"]
                    raise openai.APIError(_error_message(error), request, body=error)
                yield chunk
        # Named as the SDK's own stream names them.
        except (httpx2.TimeoutException, TimeoutError) as exc:
            raise openai.APITimeoutError(request=request) from exc
        except (httpx2.RequestError, anyio.EndOfStream) as exc:
            raise openai.APIConnectionError(request=request) from exc


async def _events(lines: AsyncIterator[str], silence_seconds: float) -> AsyncIterator[str]:
    """The data of each event: its `data:` lines joined by newlines, as the SSE standard
    reads them (one optional space after the colon is not data). Raises `TimeoutError` when
    `silence_seconds` pass with lines but no event (a server sending only keepalives)."""
    data: list[str] = []
    last_event = time.monotonic()
    async for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
                data = []
                last_event = time.monotonic()
            continue
        if time.monotonic() - last_event > silence_seconds:
            raise TimeoutError(f"no event from the model in {silence_seconds:g} s")
        if line.startswith("data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(" ") else value)
    if data:  # a body that ends without the blank line still ends its last event
        yield "\n".join(data)


def _error_message(error: object) -> str:
    message = error.get("message") if isinstance(error, dict) else None
    return message if isinstance(message, str) and message else "An error occurred during streaming"
