"""The official `openai` SDK against the running API (`/v1`): completions whole and streamed,
sessions, history merged across calls that resend the conversation, tenancy, rate limits,
idempotent retries, and OpenAI's error shape for each refusal."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import openai
import pytest

from tests.openai_compat.world import World

QUESTION = "How long do refunds take?"


def sdk(world: World, key: str) -> openai.AsyncOpenAI:
    """The client as docs/integrations.md sets it up: the API key as OpenAI's key."""
    return openai.AsyncOpenAI(base_url=f"{world.url}/v1", api_key=key, max_retries=0)


def extension(model: Any) -> dict[str, Any]:
    """The `threadline` extension field of a completion or a chunk."""
    extra = model.model_extra or {}
    assert "threadline" in extra, model
    found: dict[str, Any] = extra["threadline"]
    return found


async def test_models_lists_threadline(world: World) -> None:
    models = await sdk(world, world.a.admin_key).models.list()
    assert [m.id for m in models.data] == ["threadline"]


async def test_a_completion_with_its_sources_in_the_extension_field(world: World) -> None:
    client = sdk(world, world.a.admin_key)
    before = await world.turns(world.a.tenant_id)

    raw = await client.chat.completions.with_raw_response.create(
        model="threadline", messages=[{"role": "user", "content": QUESTION}]
    )
    completion = raw.parse()

    answer = completion.choices[0].message.content or ""
    assert "14 days" in answer and "[1]" in answer  # the passage's words, cited
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None and completion.usage.total_tokens >= 0
    details = completion.usage.prompt_tokens_details  # OpenAI's shape (no cache offline)
    assert details is not None and details.cached_tokens == 0
    found = extension(completion)
    assert found["status"] == "complete"
    assert found["sources"][0]["n"] == 1
    assert found["sources"][0]["source_id"] == world.a.document_id
    assert found["sources"][0]["cited"] is True
    # A new session was opened for it, and named in the header.
    assert raw.headers["X-Threadline-Session"] == found["session_id"]
    assert await world.turns(world.a.tenant_id) == before + 1
    stored = await world.count(
        "SELECT count(*) FROM query_history WHERE id = :t AND session_id = :s AND status = "
        "'complete'",
        t=uuid.UUID(found["turn_id"]),
        s=uuid.UUID(found["session_id"]),
    )
    assert stored == 1


async def test_a_streamed_completion_with_usage_and_sources_in_its_last_chunk(
    world: World,
) -> None:
    client = sdk(world, world.a.admin_key)
    stream = await client.chat.completions.create(
        model="threadline",
        messages=[{"role": "user", "content": QUESTION}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]

    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "14 days" in text and "[1]" in text
    finishing = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert [c.choices[0].finish_reason for c in finishing] == ["stop"]
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None  # usage: the last chunk
    assert last.usage.total_tokens == last.usage.prompt_tokens + last.usage.completion_tokens
    found = extension(last)
    assert found["sources"][0]["source_id"] == world.a.document_id
    assert found["status"] == "complete" and "answer" not in found  # as streamed
    assert (
        await world.count(
            "SELECT count(*) FROM query_history WHERE id = :t AND answer = :a",
            t=uuid.UUID(found["turn_id"]),
            a=text,
        )
        == 1
    )


async def test_a_stream_without_include_usage_has_no_usage_chunk(world: World) -> None:
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
        response = await client.post(
            "/v1/chat/completions",
            json={
                "model": "threadline",
                "messages": [{"role": "user", "content": QUESTION}],
                "stream": True,
            },
            headers={"Authorization": f"Bearer {world.a.admin_key}"},
        )
    assert response.status_code == 200
    frames = [f for f in response.text.split("\n\n") if f.startswith("data: ")]
    assert frames[-1] == "data: [DONE]"
    assert '"usage"' not in response.text
    assert '"threadline"' in frames[-2] and '"finish_reason":"stop"' in frames[-2]


async def test_history_is_merged_across_calls_that_resend_the_conversation(
    world: World,
) -> None:
    client = sdk(world, world.a.admin_key)
    questions = [QUESTION, "Are shipping costs refunded?", "Which plans does it cover?"]
    conversation: list[dict[str, str]] = []
    session: str | None = None
    for question in questions:
        conversation.append({"role": "user", "content": question})
        headers = {"X-Threadline-Session": session} if session else {}
        messages: Any = conversation
        completion = await client.chat.completions.create(
            model="threadline", messages=messages, extra_headers=headers
        )
        found = extension(completion)
        session = session or found["session_id"]
        assert found["session_id"] == session
        conversation.append(
            {"role": "assistant", "content": completion.choices[0].message.content or ""}
        )

    sid = uuid.UUID(session or "")
    assert await world.count("SELECT count(*) FROM query_history WHERE session_id = :s", s=sid) == 3
    queries = await world.count(
        "SELECT count(DISTINCT user_query) FROM query_history WHERE session_id = :s", s=sid
    )
    assert queries == 3
    # The third turn's prompt held the two stored turns once each, not again as the client's.
    included = await world.count(
        "SELECT (context_metadata->>'history_turns_included')::int FROM query_history "
        "WHERE session_id = :s AND user_query = :q",
        s=sid,
        q=questions[2],
    )
    assert included == 2


async def test_metadata_session_id_names_the_session_too(world: World) -> None:
    client = sdk(world, world.a.admin_key)
    first = await client.chat.completions.create(
        model="threadline", messages=[{"role": "user", "content": QUESTION}]
    )
    session = extension(first)["session_id"]
    second = await client.chat.completions.create(
        model="threadline",
        messages=[{"role": "user", "content": "And shipping?"}],
        metadata={"session_id": session},
    )
    assert extension(second)["session_id"] == session


async def test_another_tenants_session_is_not_found_in_openais_error_shape(
    world: World,
) -> None:
    theirs = await sdk(world, world.b.admin_key).chat.completions.create(
        model="threadline", messages=[{"role": "user", "content": "Refunds?"}]
    )
    their_session = extension(theirs)["session_id"]
    before = await world.turns(world.a.tenant_id)

    with pytest.raises(openai.NotFoundError) as caught:
        await sdk(world, world.a.admin_key).chat.completions.create(
            model="threadline",
            messages=[{"role": "user", "content": QUESTION}],
            extra_headers={"X-Threadline-Session": their_session},
        )
    body = caught.value.body
    assert isinstance(body, dict)
    assert set(body) == {"message", "type", "param", "code"}
    assert body["code"] == "session_not_found"
    assert body["type"] == "invalid_request_error"
    assert await world.turns(world.a.tenant_id) == before


async def test_a_rate_limited_call_raises_rate_limit_error(world: World) -> None:
    client = sdk(world, world.limited.member_key)
    messages: Any = [{"role": "user", "content": "Anything about refunds?"}]
    await client.chat.completions.create(model="threadline", messages=messages)
    turns = await world.turns(world.limited.tenant_id)
    sessions = await world.sessions(world.limited.tenant_id)

    with pytest.raises(openai.RateLimitError) as caught:
        await client.chat.completions.create(model="threadline", messages=messages)

    assert caught.value.status_code == 429
    assert isinstance(caught.value.body, dict) and caught.value.body["type"] == "rate_limit_error"
    # The refused turn stored nothing: no turn, and no session opened for it.
    assert await world.turns(world.limited.tenant_id) == turns
    assert await world.sessions(world.limited.tenant_id) == sessions


@pytest.mark.parametrize("stream", [False, True])
async def test_an_idempotent_retry_creates_no_second_turn(world: World, stream: bool) -> None:
    client = sdk(world, world.a.admin_key)
    key = {"Idempotency-Key": f"retry-{uuid.uuid4()}"}
    messages: Any = [{"role": "user", "content": QUESTION}]
    before = await world.turns(world.a.tenant_id)
    sessions = await world.sessions(world.a.tenant_id)

    answers = []
    for _ in range(2):
        if stream:
            chunks = [
                c
                async for c in await client.chat.completions.create(
                    model="threadline", messages=messages, stream=True, extra_headers=key
                )
            ]
            answers.append(extension(chunks[-1]))
        else:
            completion = await client.chat.completions.create(
                model="threadline", messages=messages, extra_headers=key
            )
            answers.append(extension(completion))

    assert answers[0]["turn_id"] == answers[1]["turn_id"]
    assert answers[0]["session_id"] == answers[1]["session_id"]
    assert await world.turns(world.a.tenant_id) == before + 1
    assert await world.sessions(world.a.tenant_id) == sessions + 1
