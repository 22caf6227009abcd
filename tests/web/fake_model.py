"""An OpenAI-compatible model on loopback for the browser tests, whose answer depends on the
question: it cites every source of its prompt, streams slowly when asked to, and returns
hostile Markdown when the question asks for it (the page must render it inert)."""

from __future__ import annotations

import asyncio
import json
import re
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

from tests.server_process import free_port

XSS_ANSWER = (
    'Careful: <img src=x onerror="window.__xss = 1"> and <script>window.__xss = 2</script> '
    "and [click me](javascript:window.__xss=3) end"
)


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


def answer_for(prompt: str) -> tuple[list[str], float]:
    """The answer's pieces and the delay between them, chosen by the question."""
    cited = "".join(f" [{n}]" for n in dict.fromkeys(re.findall(r"^\[(\d+)\] ", prompt, re.M)))
    question = prompt.rpartition("Question:")[2].lower()
    if "hostile" in question:
        return [*(f"{w} " for w in XSS_ANSWER.split(" ")), cited.strip()], 0.01
    if "slowly" in question:
        return [f"part{i} " for i in range(120)], 0.1
    words = [f"word{i} " for i in range(24)]
    return ["Here is what the sources say", cited, ". ", *words], 0.04


def build_app() -> Starlette:
    async def completions(request: Request) -> Response:
        body = await request.json()
        prompt = str(body["messages"][-1]["content"])
        pieces, delay = answer_for(prompt)
        usage = {
            "prompt_tokens": 10,
            "completion_tokens": len(pieces),
            "total_tokens": 10 + len(pieces),
        }

        if not body.get("stream"):  # summaries and rewrites ask for the whole text at once
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
def fake_model() -> Iterator[str]:
    """Serve the fake model in a thread; yields its base URL (…/v1)."""
    port = free_port()
    config = uvicorn.Config(
        build_app(), host="127.0.0.1", port=port, log_level="warning", lifespan="off"
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
        server.should_exit = server.force_exit = True
        thread.join(timeout=5)
