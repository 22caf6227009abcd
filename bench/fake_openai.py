"""A slow OpenAI-compatible model server on loopback, for benchmarks that need a real network
hop to the model (the app reaches it through THREADLINE_LLM=openai-compatible).

    python -m bench.fake_openai --port 8900 [--tokens 30] [--interval 0.2]
    python -m bench.fake_openai --port 8900 --shaped [--tokens 40]


`POST /v1/chat/completions` answers every prompt with the same `--tokens` words, one every
`--interval` seconds: streamed as `chat.completion.chunk` events ending with a usage chunk
(when `stream_options.include_usage` asks for it) and `[DONE]`, or, unstreamed, as one
`chat.completion` after the same total time. Tools offered are ignored: the model always
answers in text, so the app's tool loop ends after one call. A plain ASGI app, so that the
server itself costs next to nothing beside the process under test.

`--shaped` serves `ShapedOpenAI` instead: a provider's shape rather than a fixed pace — 300 ms
to the first token, then 50 tokens/s, answers that differ with the prompt, usage that reports
cached prompt tokens the way OpenAI does, and a record of every request at `GET /v1/stats`
(see bench/model_turn.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

LAST_WORD = "finis."
"""The answer's last word: a client that saw it received the whole answer."""


def answer_words(tokens: int) -> list[str]:
    """The answer, word by word (each word one streamed token)."""
    return [f"word{i:02d} " for i in range(tokens - 1)] + [LAST_WORD]


class FakeOpenAI:
    """The ASGI app: a model that takes `tokens * interval` seconds to answer."""

    def __init__(self, tokens: int, interval: float) -> None:
        self.words = answer_words(tokens)
        self.interval = interval

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        if scope["method"] != "POST" or not scope["path"].endswith("/chat/completions"):
            await _json(send, 404, {"error": {"message": "not found", "type": "not_found"}})
            return
        raw = await read_body(receive)
        request: dict[str, Any] = json.loads(raw or b"{}")
        model = str(request.get("model", "fake"))
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in request["messages"])
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": len(self.words),
            "total_tokens": prompt_tokens + len(self.words),
        }
        if request.get("stream"):
            wants_usage = bool((request.get("stream_options") or {}).get("include_usage"))
            await stream_completion(
                send, model, self.words, usage if wants_usage else None, self._pause
            )
            return
        await asyncio.sleep(self.interval * len(self.words))
        await _json(send, 200, completion(model, "".join(self.words), usage))

    async def _pause(self, _index: int) -> None:
        await asyncio.sleep(self.interval)


def completion(model: str, text: str, usage: dict[str, Any]) -> dict[str, Any]:
    """A whole `chat.completion` answering `text`."""
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": text},
            }
        ],
        "usage": usage,
    }


async def stream_completion(
    send: Send,
    model: str,
    words: list[str],
    usage: dict[str, Any] | None,
    pause: Callable[[int], Awaitable[None]],
    tool_call: dict[str, str] | None = None,
) -> None:
    """`words` as `chat.completion.chunk` events, `pause(i)` awaited before the i-th; then
    `tool_call` (a function's `name` and JSON `arguments`) when given, the finishing chunk, the
    usage chunk when asked for, and `[DONE]`."""
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")],
        }
    )
    base = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }

    async def chunk(payload: dict[str, Any]) -> None:
        body = f"data: {json.dumps({**base, **payload})}\n\n".encode()
        await send({"type": "http.response.body", "body": body, "more_body": True})

    first = {"role": "assistant", "content": ""}
    await chunk({"choices": [{"index": 0, "delta": first, "finish_reason": None}]})
    for index, word in enumerate(words):
        await pause(index)
        delta = {"content": word}
        await chunk({"choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
    finish = "stop"
    if tool_call is not None:
        await pause(len(words))
        call = {"index": 0, "id": f"call_{uuid.uuid4().hex[:12]}", "type": "function"}
        calls = {"tool_calls": [{**call, "function": tool_call}]}
        await chunk({"choices": [{"index": 0, "delta": calls, "finish_reason": None}]})
        finish = "tool_calls"
    await chunk({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    if usage is not None:
        await chunk({"choices": [], "usage": usage})
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})


async def read_body(receive: Receive) -> bytes:
    """The whole request body, however many messages the server splits it into."""
    raw = b""
    while True:
        message = await receive()
        raw += bytes(message.get("body", b""))
        if not message.get("more_body"):
            return raw


async def _json(send: Send, status: int, payload: dict[str, Any]) -> None:
    body = json.dumps(payload).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tokens", type=int, default=30)
    parser.add_argument("--interval", type=float, default=0.2)
    parser.add_argument("--shaped", action="store_true", help="ShapedOpenAI (a provider's shape)")
    args = parser.parse_args()
    if args.shaped:
        from bench.fake_shaped import ShapedOpenAI

        app: Any = ShapedOpenAI(args.tokens)
    else:
        app = FakeOpenAI(args.tokens, args.interval)
    # Loopback only: this server exists for benchmarks on this machine.
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
