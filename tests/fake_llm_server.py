"""A slow OpenAI-compatible model server on loopback, for tests that run the API as a real
process (`THREADLINE_LLM=openai-compatible`): the model is faked at the provider boundary,
over HTTP, as `tests/fakes.py` fakes it in-process.

`POST /v1/chat/completions` answers with the pieces an `Answer` chooses for the prompt,
streamed one chunk per piece after its delay (with `stream: true`), or whole: at once, or
with `paced_whole` after all the delays (as slow as a real model that does not stream).
`fake_llm_server` answers `words` words ("w0 w1 …"); the browser tests serve their own
answers through `serve_model` (tests/web/fake_model.py).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.server_process import free_port

CACHED_PROMPT_TOKENS = 8
"""Of the 10 prompt tokens every answer reports, those OpenAI would say came from its cache."""

Answer = Callable[[str], tuple[list[str], float]]
"""From the prompt's last message: the answer's pieces and the delay before each."""


def answer_words(count: int) -> list[str]:
    """The answer `fake_llm_server` gives: `count` words, "w0 w1 …"."""
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


def build_app(answer: Answer, *, paced_whole: bool = False) -> Starlette:
    """The fake model's application, answering each prompt as `answer` says; with
    `paced_whole`, a whole (non-streamed) answer takes as long as its stream would."""

    async def completions(request: Request) -> Response:
        body = await request.json()
        pieces, delay = answer(str(body["messages"][-1]["content"]))
        usage = {
            "prompt_tokens": 10,
            "completion_tokens": len(pieces),
            "total_tokens": 10 + len(pieces),
            "prompt_tokens_details": {"cached_tokens": CACHED_PROMPT_TOKENS},
        }
        if not body.get("stream"):  # summaries, rewrites and `/chat` ask for the whole text
            if paced_whole:  # a model is no faster for not streaming
                await asyncio.sleep(delay * len(pieces))
            message = {"role": "assistant", "content": "".join(pieces)}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            return JSONResponse(
                {
                    "id": "fake",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": "fake",
                    "choices": [choice],
                    "usage": usage,
                }
            )

        async def stream() -> AsyncIterator[bytes]:
            for piece in pieces:
                await asyncio.sleep(delay)
                yield _chunk(piece)
            yield _chunk(None, "stop")
            yield _chunk(None, usage=usage)
            yield b"data: [DONE]\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])


@contextmanager
def serve_model(answer: Answer, *, paced_whole: bool = False) -> Iterator[str]:
    """Serve a fake model answering as `answer` says, in a thread; yields its base URL (…/v1)."""
    port = free_port()
    config = uvicorn.Config(
        build_app(answer, paced_whole=paced_whole),
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


@contextmanager
def fake_llm_server(
    words: int = 200, token_delay: float = 0.05, *, paced_whole: bool = False
) -> Iterator[str]:
    """Serve a model answering `words` words, one every `token_delay` s (`paced_whole`: a
    non-streamed answer too, whole at the end); yields its base URL."""
    pieces = answer_words(words)
    with serve_model(lambda _prompt: (pieces, token_delay), paced_whole=paced_whole) as url:
        yield url
