"""A slow OpenAI-compatible model server on loopback, for tests that run the API as a real
process (`THREADLINE_LLM=openai-compatible`): the model is faked at the provider boundary,
over HTTP, as `tests/fakes.py` fakes it in-process.

`POST /v1/chat/completions` answers `words` words ("w0 w1 …"), streamed one chunk per word
every `token_delay` seconds (with `stream: true`), or whole at once.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


def answer_words(count: int) -> list[str]:
    return [f"w{i} " for i in range(count)]


def _chunk(content: str | None, finish: str | None = None, usage: Any = None) -> bytes:
    choices = (
        [] if usage else [{"index": 0, "delta": {"content": content}, "finish_reason": finish}]
    )
    body: dict[str, Any] = {
        "id": "fake",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": "fake",
        "choices": choices,
    }
    if usage:
        body["usage"] = usage
    return f"data: {json.dumps(body)}\n\n".encode()


def build_app(words: int, token_delay: float) -> Starlette:
    async def completions(request: Request) -> Response:
        body = await request.json()
        pieces = answer_words(words)
        usage = {"prompt_tokens": 10, "completion_tokens": words, "total_tokens": 10 + words}
        if not body.get("stream"):
            return JSONResponse(
                {
                    "id": "fake",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": "fake",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "".join(pieces)},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": usage,
                }
            )

        async def stream() -> AsyncIterator[bytes]:
            for piece in pieces:
                await asyncio.sleep(token_delay)
                yield _chunk(piece)
            yield _chunk(None, "stop")
            yield _chunk(None, usage=usage)
            yield b"data: [DONE]\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def fake_llm_server(words: int = 200, token_delay: float = 0.05) -> Iterator[str]:
    """Serve the fake model in a thread; yields its base URL (…/v1)."""
    port = _free_port()
    config = uvicorn.Config(
        build_app(words, token_delay),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="off",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the fake model server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = server.force_exit = True  # streams still open are cut
        thread.join(timeout=5)
