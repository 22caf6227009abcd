"""Text messages skip the openai SDK's transform, and the request body is the same as if
they had not: compared byte for byte with the SDK's own `chat.completions.create`."""

from __future__ import annotations

import json
from typing import Any

import httpx2 as httpx
import pytest
from openai import AsyncOpenAI

from app.config import Settings
from app.llm.openai_messages import PlainMessageCompletions, is_plain
from app.llm.providers import build_responder
from app.llm.responder import ChatModelResponder

TEXT_PROMPT: list[dict[str, Any]] = [
    {"role": "system", "content": "Answer from the sources."},
    {"role": "user", "content": "What are the support hours?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "9 to 5"},
    {"role": "user", "content": "And on weekends?"},
]
PARTS_PROMPT: list[dict[str, Any]] = [
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is in this file?"},
            {"type": "file", "file": {"filename": "a.txt", "file_data": "aGVsbG8="}},
        ],
    }
]


def _client(bodies: list[bytes]) -> AsyncOpenAI:
    def answer(request: httpx.Request) -> httpx.Response:
        bodies.append(request.content)
        message = {"role": "assistant", "content": "ok"}
        return httpx.Response(
            200,
            json={
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            },
        )

    transport = httpx.MockTransport(answer)
    return AsyncOpenAI(
        api_key="none",
        base_url="http://model.test/v1",
        http_client=httpx.AsyncClient(transport=transport),
    )


@pytest.mark.parametrize("messages", [TEXT_PROMPT, PARTS_PROMPT], ids=["text", "parts"])
@pytest.mark.parametrize("extra_body", [None, {"top_k": 3}], ids=["plain", "extra-body"])
async def test_the_body_sent_is_the_sdks_own(
    messages: list[dict[str, Any]], extra_body: dict[str, Any] | None
) -> None:
    bodies: list[bytes] = []
    client = _client(bodies)
    params: dict[str, Any] = {"model": "m", "temperature": 0.2, "extra_body": extra_body}
    await client.chat.completions.create(messages=messages, **params)  # type: ignore[arg-type]
    completions = PlainMessageCompletions(client, silence_seconds=60)
    await completions.create(messages=iter(messages), **params)
    sdk, ours = (json.loads(body) for body in bodies)
    assert ours == sdk
    assert ours["messages"] == messages


def test_only_text_messages_are_plain() -> None:
    assert all(is_plain(m) for m in TEXT_PROMPT)
    assert not is_plain(PARTS_PROMPT[0])
    assert not is_plain({"role": "user", "content": "hi", "audio": {"id": "a"}})


def test_the_openai_providers_send_text_messages_untransformed() -> None:
    for settings in (
        Settings(llm="openai", openai_api_key="sk-test"),
        Settings(llm="openai-compatible", openai_base_url="http://127.0.0.1:9/v1"),
    ):
        responder = build_responder(settings)
        assert isinstance(responder, ChatModelResponder)
        assert isinstance(responder.model.async_client, PlainMessageCompletions)  # type: ignore[attr-defined]
