"""The translation of a native event stream into OpenAI chunks, on events as
app/conversation/streaming/sse.py encodes them: tokens of any text, heartbeats, an error, an answer
the output checks changed after it was streamed."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

from app.conversation.streaming.sse import HEARTBEAT, format_event, retry_hint
from app.openai_compat.chunks import completion_chunks

TURN = uuid.uuid4()
SESSION = uuid.uuid4()
TOKENS = ['Say "hi"\n', "naïve — ", "ok\\", " [1]"]


async def _native(pieces: list[bytes]) -> AsyncIterator[bytes]:
    for piece in pieces:
        yield piece


def _done(answer: str) -> bytes:
    data = {
        "session_id": str(SESSION),
        "turn_id": str(TURN),
        "status": "complete",
        "answer": answer,
        "query_composition": "pure_kb",
        "usage": {
            "prompt_tokens": 5,
            "completion_tokens": 4,
            "total_tokens": 9,
            "cached_prompt_tokens": 3,
        },
        "model": "fake",
    }
    return format_event(9, "done", data)


def _stream(answer: str) -> list[bytes]:
    pieces = [retry_hint(1000), format_event(1, "meta", {"session_id": str(SESSION)})]
    pieces += [format_event(2 + i, "token", {"text": t}) for i, t in enumerate(TOKENS)]
    pieces += [HEARTBEAT, format_event(7, "sources", {"sources": [{"n": 1}]}), _done(answer)]
    return pieces


async def _translate(pieces: list[bytes], include_usage: bool) -> list[bytes]:
    return [frame async for frame in completion_chunks(_native(pieces), TURN, include_usage)]


def _chunks(frames: list[bytes]) -> list[dict[str, Any]]:
    return [
        json.loads(f[6:]) for f in frames if f.startswith(b"data: ") and f != b"data: [DONE]\n\n"
    ]


async def test_tokens_of_any_text_arrive_intact_and_in_order() -> None:
    frames = await _translate(_stream("".join(TOKENS)), include_usage=True)

    assert frames[-1] == b"data: [DONE]\n\n"
    assert HEARTBEAT in frames  # kept: proxies see the stream alive
    chunks = _chunks(frames)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    deltas = [c["choices"][0]["delta"].get("content") for c in chunks[1:5]]
    assert deltas == TOKENS
    assert all(c["id"] == f"chatcmpl-{TURN.hex}" for c in chunks)
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    last = chunks[-1]
    assert last["choices"] == [] and last["usage"]["total_tokens"] == 9
    # OpenAI's shape: the cached prompt tokens are a detail of the prompt tokens
    assert last["usage"]["prompt_tokens_details"] == {"cached_tokens": 3}
    assert "cached_prompt_tokens" not in last["usage"]
    assert last["threadline"]["sources"] == [{"n": 1}]
    assert "answer" not in last["threadline"]  # the stored answer is what was streamed


async def test_without_usage_the_finishing_chunk_is_last_and_carries_the_extension() -> None:
    chunks = _chunks(await _translate(_stream("".join(TOKENS)), include_usage=False))
    assert "usage" not in chunks[-1]
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["threadline"]["turn_id"] == str(TURN)


async def test_an_answer_changed_after_streaming_is_given_in_the_extension() -> None:
    chunks = _chunks(await _translate(_stream("[redacted]"), include_usage=False))
    assert chunks[-1]["threadline"]["answer"] == "[redacted]"


async def test_an_error_event_is_openais_in_stream_error() -> None:
    pieces = [
        format_event(1, "token", {"text": "Part"}),
        format_event(2, "error", {"code": "generation_failed", "message": "It failed."}),
    ]
    frames = await _translate(pieces, include_usage=False)
    error = json.loads(frames[-2][6:])["error"]
    assert error == {
        "message": "It failed.",
        "type": "server_error",
        "param": None,
        "code": "generation_failed",
    }
    assert frames[-1] == b"data: [DONE]\n\n"


async def test_several_events_in_one_piece_are_all_translated() -> None:
    joined = b"".join(format_event(i, "token", {"text": t}) for i, t in enumerate(TOKENS))
    chunks = _chunks(await _translate([joined, _done("".join(TOKENS))], include_usage=False))
    assert [c["choices"][0]["delta"].get("content") for c in chunks[1:5]] == TOKENS
    assert "answer" not in chunks[-1]["threadline"]
