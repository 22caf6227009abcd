"""A streamed answer read as dicts (app/llm/openai_stream.py) gives LangChain the same message
the SDK's own stream gives it: text, tool calls, usage and metadata; an error chunk, a server
that only sends keepalives and a broken body end it with the SDK's own error types."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx2 as httpx
import openai
import pytest
from langchain_core.messages import AIMessageChunk, HumanMessage
from langchain_openai import ChatOpenAI

from app.llm.openai_messages import PlainMessageCompletions
from app.llm.openai_stream import ChunkDicts


def _chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "system_fingerprint": "fp",
        "choices": [choice],
        **extra,
    }


def _tool_delta(index: int, **function: str) -> dict[str, Any]:
    call: dict[str, Any] = {"index": index, "function": function}
    if "name" in function:
        call |= {"id": f"call_{index}", "type": "function"}
    return {"tool_calls": [call]}


CHUNKS = [
    _chunk({"role": "assistant", "content": ""}),
    _chunk({"content": "Support is open "}),
    _chunk({"content": "9 to 5 [1]."}),
    _chunk(_tool_delta(0, name="search_knowledge_base", arguments="")),
    _chunk(_tool_delta(0, arguments='{"query": "week')),
    _chunk(_tool_delta(0, arguments='ends"}')),
    _chunk({}, "tool_calls"),
    {
        **_chunk({}),
        "choices": [],
        "usage": {"prompt_tokens": 21, "completion_tokens": 9, "total_tokens": 30},
    },
]


def _sse(chunks: list[dict[str, Any]]) -> list[bytes]:
    """The body an OpenAI-compatible server sends: a comment, events split across lines and
    reads, and what comes after `[DONE]`."""
    parts = [b": keepalive\n\n", b"event: message\nid: 1\n"]
    for chunk in chunks:
        text = json.dumps(chunk)
        middle = len(text) // 2
        parts.append(f"data: {text[:middle]}".encode())  # one event across two reads
        parts.append(f"{text[middle:]}\n\n".encode())
    parts.append(b"data: [DONE]\n\n")
    parts.append(b": the end\n\n")
    return parts


def _model(body: Callable[[], AsyncIterator[bytes]], *, ours: bool, silence: float = 5) -> Any:
    async def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())

    chat = ChatOpenAI(
        model="m",
        api_key="none",
        base_url="http://model.test/v1",
        stream_usage=True,
        max_retries=0,
        http_async_client=httpx.AsyncClient(transport=httpx.MockTransport(answer)),
    )
    if ours:
        chat.async_client = PlainMessageCompletions(chat.root_async_client, silence_seconds=silence)
    return chat


def _body(parts: list[bytes], pause: float = 0, read: list[bytes] | None = None) -> Any:
    async def body() -> AsyncIterator[bytes]:
        for part in parts:
            if pause:
                await asyncio.sleep(pause)
            if read is not None:
                read.append(part)
            yield part

    return body


async def _streamed(model: Any) -> AIMessageChunk:
    reply: AIMessageChunk | None = None
    async for chunk in model.astream([HumanMessage("What are the support hours?")]):
        reply = chunk if reply is None else reply + chunk
    assert reply is not None
    return reply


async def test_the_message_is_the_one_the_sdks_stream_gives() -> None:
    sdk = await _streamed(_model(_body(_sse(CHUNKS)), ours=False))
    read: list[bytes] = []
    ours = await _streamed(_model(_body(_sse(CHUNKS), read=read), ours=True))

    assert ours.content == sdk.content == "Support is open 9 to 5 [1]."
    assert ours.tool_calls == sdk.tool_calls
    assert ours.tool_calls[0]["args"] == {"query": "weekends"}
    assert ours.usage_metadata == sdk.usage_metadata
    assert ours.usage_metadata is not None and ours.usage_metadata["total_tokens"] == 30
    assert ours.response_metadata == sdk.response_metadata
    assert ours.response_metadata["finish_reason"] == "tool_calls"
    assert read[-1] == b": the end\n\n", "the body after [DONE] is read, so the pool reuses it"


async def test_an_error_chunk_raises_the_sdks_api_error() -> None:
    error = {"error": {"message": "the model is overloaded", "type": "server_error"}}
    model = _model(_body(_sse([CHUNKS[1], error, CHUNKS[2]])), ours=True)
    with pytest.raises(openai.APIError, match="the model is overloaded"):
        await _streamed(model)


async def test_a_server_sending_only_keepalives_is_ended_after_the_silence() -> None:
    parts = [f"data: {json.dumps(CHUNKS[1])}\n\n".encode()] + [b": keepalive\n\n"] * 40
    model = _model(_body(parts, pause=0.02), ours=True, silence=0.2)
    started = asyncio.get_running_loop().time()
    with pytest.raises(openai.APITimeoutError):
        await _streamed(model)
    assert asyncio.get_running_loop().time() - started < 0.6, "ended at the silence, not the end"


async def test_a_broken_body_raises_the_sdks_connection_error() -> None:
    async def broken() -> AsyncIterator[bytes]:
        yield f"data: {json.dumps(CHUNKS[1])}\n\n".encode()
        raise httpx.ReadError("connection reset")

    with pytest.raises(openai.APIConnectionError):
        await _streamed(_model(broken, ours=True))


async def test_an_event_without_its_closing_blank_line_still_counts() -> None:
    stream = _model(_body([f"data: {json.dumps(CHUNKS[1])}".encode()]), ours=True)
    payload = stream._get_request_payload([HumanMessage("hi")], stream=True)
    async with await stream.async_client.create(**payload) as chunks:
        assert isinstance(chunks, ChunkDicts)
        assert [c["choices"][0]["delta"] async for c in chunks] == [{"content": "Support is open "}]
