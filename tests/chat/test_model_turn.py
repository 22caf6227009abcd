"""The model's turn (ADR 0035): one model call before the answer, the summary folded in the
background a batch at a time and only once, a stable prompt prefix, cached tokens recorded
and charged at the provider's ratio, Anthropic's cache breakpoints."""

from __future__ import annotations

import asyncio
import itertools
import math
import re
import time
import uuid
from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import SecretStr
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.conversation.pipeline.summary_job import fold_session
from app.conversation.repository import SessionStateRepository
from app.conversation.turn.types import ChatMessage
from app.core.db import scope_to_tenant
from app.limits.limiter import cached_token_ratio, chargeable_tokens
from app.llm.providers import build_responder
from app.llm.responder import ChatModelResponder, Generation, ModelRequest
from app.models import ChatSession
from tests.chat_helpers import ask, stored_turn, stream_chat, use_model
from tests.factories import make_chatter, make_turn
from tests.fake_llm_server import CACHED_PROMPT_TOKENS, fake_llm_server
from tests.fakes import ProviderError, ScriptedChatModel, text_of

pytestmark = pytest.mark.committed  # the in-process summary job opens its own transactions

WINDOW = 2


def kind(messages: list[BaseMessage]) -> str:
    """What a model call was for: the answer, a summary fold or a follow-up rewrite."""
    text = text_of(messages)
    if "running summary" in text:
        return "summary"
    if "Rewrite the user's last message" in text:
        return "rewrite"
    return "answer"


def summarise_or_answer(messages: list[BaseMessage]) -> str:
    if kind(messages) == "summary":
        rules = sorted(set(re.findall(r"policy \d+", text_of(messages))))
        return "We covered " + ", ".join(rules) + "."
    return "The handbook says so."


def question(i: int) -> str:
    """A standalone question (the follow-up rules find nothing to rewrite)."""
    return f"How many vacation days does handbook policy {i} grant employees?"


async def stored_session(db: AsyncSession, tenant_id: uuid.UUID, chat_id: uuid.UUID) -> Any:
    await scope_to_tenant(db, tenant_id)
    stored = await db.scalar(
        select(ChatSession)
        .where(ChatSession.id == chat_id)
        .execution_options(populate_existing=True)
    )
    await db.commit()
    return stored


def metric(text: str, name: str, **labels: str) -> float:
    """One sample of the /metrics exposition (0 when absent)."""
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith(f"{name}{{{wanted}}} "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.fixture
def short_window(app: FastAPI) -> None:
    app.state.resources.history.limit = WINDOW


@pytest.mark.usefixtures("short_window")
async def test_each_turn_past_the_window_calls_the_model_once_and_folds_in_batches_after(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant, _user, chat, owner = await make_chatter(client, db)
    model = ScriptedChatModel(reply=summarise_or_answer)
    use_model(app, model)
    batch = app.state.resources.settings.summary_batch_turns
    turns = WINDOW + 2 * batch  # two batches leave the window
    per_turn: list[list[str]] = []
    for i in range(turns):
        before = len(model.calls)
        response = await ask(client, owner, chat, question(i))
        assert response.status_code == 200, response.text
        await app.state.resources.jobs.drain()  # the summary job, if one was due
        per_turn.append([kind(call) for call in model.calls[before:]])

    # One call before each answer: the answer's. A fold comes after, off the turn's path.
    assert all(calls[0] == "answer" and calls.count("answer") == 1 for calls in per_turn)
    folds = [i + 1 for i, calls in enumerate(per_turn) if "summary" in calls]
    assert folds == [WINDOW + batch, WINDOW + 2 * batch]  # one per batch, never per turn
    assert all(calls.count("summary") <= 1 for calls in per_turn)
    stored = await stored_session(db, tenant.id, chat.id)
    assert stored.summarized_turns == 2 * batch
    assert "policy 0" in stored.summary and "policy 9" in stored.summary
    assert stored.summary_claimed_until is None


@pytest.mark.usefixtures("short_window")
async def test_between_folds_each_prompt_starts_with_the_previous_one(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    _tenant, _user, chat, owner = await make_chatter(client, db)
    model = ScriptedChatModel(reply=summarise_or_answer)
    use_model(app, model)
    batch = app.state.resources.settings.summary_batch_turns
    for i in range(WINDOW + batch + 3):
        assert (await ask(client, owner, chat, question(i))).status_code == 200
        await app.state.resources.jobs.drain()

    prompts = model.answer_prompts()
    kept = [
        later[: len(earlier) - 1] == earlier[:-1] for earlier, later in itertools.pairwise(prompts)
    ]
    fold_after = WINDOW + batch  # the summary changes once, before the next turn
    assert kept == [i + 1 != fold_after for i in range(len(kept))]
    summary = prompts[fold_after][0].content
    assert isinstance(summary, str) and "Summary of the earlier conversation" in summary
    # The summary sits before the history, the new question at the very end.
    assert str(prompts[-1][-1].content).endswith(question(WINDOW + batch + 2))


async def test_two_jobs_for_one_session_fold_its_turns_once(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant, _user, chat, _owner = await make_chatter(client, db)
    for i in range(8):
        await make_turn(db, chat, user_query=question(i), answer=f"Answer {i}.")
    await db.commit()

    class SlowSummaries(ScriptedChatModel):
        async def _agenerate(
            self,
            messages: list[BaseMessage],
            stop: list[str] | None = None,
            run_manager: AsyncCallbackManagerForLLMRun | None = None,
            **kwargs: Any,
        ) -> ChatResult:
            await asyncio.sleep(0.3)  # both jobs are in flight at once
            return await super()._agenerate(messages, stop, run_manager, **kwargs)

    model = SlowSummaries(reply=summarise_or_answer)
    use_model(app, model)
    context = app.state.resources.turn_context
    context.history.limit = WINDOW

    outcomes = await asyncio.gather(
        fold_session(context, tenant.id, chat.id), fold_session(context, tenant.id, chat.id)
    )

    assert sorted(outcomes) == ["busy", "folded"]
    assert [kind(c) for c in model.calls] == ["summary"]  # computed once
    stored = await stored_session(db, tenant.id, chat.id)
    assert stored.summarized_turns == 8 - WINDOW
    assert stored.summary_claimed_until is None
    # And a job with nothing due leaves the session as it is.
    assert await fold_session(context, tenant.id, chat.id) == "not_due"
    assert len(model.calls) == 1


async def test_a_fold_is_stored_only_over_the_summary_it_read(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant, _user, chat, _owner = await make_chatter(client, db)
    await scope_to_tenant(db, tenant.id)
    state = SessionStateRepository(db, tenant.id)
    claimed = await state.claim_fold(chat.id, 60)
    assert claimed is not None and claimed[:2] == ("", 0)
    claim = claimed[2]
    assert await state.claim_fold(chat.id, 60) is None  # claimed
    assert await state.store_fold(chat.id, claim, 3, "stale", 8) is False  # it covered 0, not 3
    other_claim = claim + timedelta(seconds=1)  # a job whose lapsed claim was taken over
    assert await state.store_fold(chat.id, other_claim, 0, "late", 5) is False
    assert await state.store_fold(chat.id, claim, 0, "fresh", 5) is True
    again = await state.claim_fold(chat.id, 60)
    assert again is not None and again[:2] == ("fresh", 5)  # the claim was released
    await db.rollback()


async def test_retention_purging_a_session_under_fold_drops_the_fold(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    from app.retention.repository import RetentionRepository

    tenant, _user, chat, _owner = await make_chatter(client, db)
    await scope_to_tenant(db, tenant.id)
    state = SessionStateRepository(db, tenant.id)
    claimed = await state.claim_fold(chat.id, 60)  # a first fold (covering 0) under way
    assert claimed is not None
    # Retention purges the turns that fold read: the summary and the claim are reset.
    assert await RetentionRepository(db, tenant.id).reset_summaries([chat.id]) == 1
    assert await state.store_fold(chat.id, claimed[2], 0, "of purged turns", 5) is False
    await db.rollback()


@pytest.mark.usefixtures("short_window")
async def test_a_failing_summary_leaves_the_turn_complete_and_the_fold_pending(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant, _user, chat, owner = await make_chatter(client, db)
    batch = app.state.resources.settings.summary_batch_turns

    def failing(messages: list[BaseMessage]) -> str:
        if kind(messages) == "summary":
            raise ProviderError("the summary model is down")
        return "The handbook says so."

    use_model(app, ScriptedChatModel(reply=failing))
    failed_before = metric(
        (await client.get("/metrics")).text, "threadline_summary_jobs_total", outcome="failed"
    )
    for i in range(WINDOW + batch):
        response = await ask(client, owner, chat, question(i))
        assert response.status_code == 200, response.text
        assert response.json()["status"] == "complete"
        await app.state.resources.jobs.drain()

    text = (await client.get("/metrics")).text
    assert metric(text, "threadline_summary_jobs_total", outcome="failed") == failed_before + 1
    stored = await stored_session(db, tenant.id, chat.id)
    assert (stored.summarized_turns, stored.summary) == (0, None)
    assert stored.summary_claimed_until is None  # released: the next job may fold

    # The next turn still reads every uncovered turn, and enqueues the fold again.
    model = ScriptedChatModel(reply=summarise_or_answer)
    use_model(app, model)
    response = await ask(client, owner, chat, question(99))
    assert response.json()["context_metadata"]["history_turns_included"] == WINDOW + batch
    await app.state.resources.jobs.drain()
    stored = await stored_session(db, tenant.id, chat.id)
    assert stored.summarized_turns == batch + 1  # everything that has left the window


class CachingModel(ScriptedChatModel):
    """Reports usage as a provider with a prompt cache does (LangChain's usage_metadata)."""

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls.append(list(messages))
        usage: Any = {
            "input_tokens": 1000,
            "output_tokens": 10,
            "total_tokens": 1010,
            "input_token_details": {"cache_read": 800},
        }
        message = AIMessage(content=self.reply(messages), usage_metadata=usage)
        return ChatResult(generations=[ChatGeneration(message=message)])


async def test_cached_tokens_are_recorded_and_charged_at_the_ratio(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant, user, chat, owner = await make_chatter(client, db)
    use_model(app, CachingModel(reply=lambda _: "The handbook says so."))
    limiter = app.state.resources.guards.limiter
    limiter.cached_ratio = cached_token_ratio(Settings(cached_token_ratio=0.1))
    before = metric(
        (await client.get("/metrics")).text, "threadline_tokens_total", kind="cached_prompt"
    )

    response = await ask(client, owner, chat, question(1))

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["usage"] == {
        "prompt_tokens": 1000,
        "completion_tokens": 10,
        "total_tokens": 1010,
        "cached_prompt_tokens": 800,
    }
    assert body["context_metadata"]["prompt_cache"]["cached_prompt_tokens"] == 800
    row = await stored_turn(db, tenant.id, body["turn_id"])
    assert row.context_metadata["prompt_cache"]["cached_prompt_tokens"] == 800
    text = (await client.get("/metrics")).text
    assert metric(text, "threadline_tokens_total", kind="cached_prompt") == before + 800
    day_key = limiter._keys(tenant.id, user.id, time.time())["user_day"]
    charged = int(await app.state.resources.redis.client.get(day_key))
    assert charged == 1010 - 800 + 80  # 800 cached tokens count for a tenth each


def test_the_cached_token_ratio_defaults_to_the_providers() -> None:
    assert cached_token_ratio(Settings(llm="openai")) == 0.5
    assert cached_token_ratio(Settings(llm="anthropic")) == 0.1
    assert cached_token_ratio(Settings(llm="extractive")) == 1.0
    assert cached_token_ratio(Settings(llm="anthropic", cached_token_ratio=0.3)) == 0.3
    usage = {"total_tokens": 1010, "cached_prompt_tokens": 801}
    assert chargeable_tokens(usage, 0.5) == 1010 - 801 + math.ceil(400.5)
    assert chargeable_tokens({"total_tokens": 50}, 0.1) == 50


@pytest.mark.parametrize("streamed", [True, False])
async def test_openai_cached_tokens_are_read_from_the_providers_usage(streamed: bool) -> None:
    """The real OpenAI provider against a loopback OpenAI-compatible server that reports
    `prompt_tokens_details.cached_tokens`."""
    with fake_llm_server(words=3, token_delay=0) as url:
        responder = build_responder(Settings(llm="openai-compatible", openai_base_url=url))
        prompt = [ChatMessage(role="user", content="hello")]
        request = ModelRequest(prompt=prompt, sources=[], history=[], query="hello")
        generation = Generation()
        if streamed:
            assert [d async for d in responder.stream(request, generation)]
        else:
            assert await responder.answer(request, generation)
    assert (generation.prompt_tokens, generation.cached_prompt_tokens) == (
        10,
        CACHED_PROMPT_TOKENS,
    )


def test_anthropic_requests_carry_cache_breakpoints_at_the_stable_prefix() -> None:
    """What would be sent to Anthropic: the instructions and the summary as system blocks,
    each ending a cached prefix, and a breakpoint on the newest history message; none on the
    new question (it changes every turn)."""
    responder = build_responder(Settings(llm="anthropic", anthropic_api_key=SecretStr("k")))
    assert isinstance(responder, ChatModelResponder) and responder.cache_breakpoints
    prompt = [
        ChatMessage(role="system", content="You are Threadline."),
        ChatMessage(role="system", content="Summary of the earlier conversation:\nThings."),
        ChatMessage(role="user", content="Question 1?"),
        ChatMessage(role="assistant", content="Answer 1."),
        ChatMessage(role="user", content="Sources: ...\n\nQuestion: Question 2?"),
    ]
    payload = responder.model._get_request_payload(responder.messages(prompt))  # type: ignore[attr-defined]

    ephemeral = {"type": "ephemeral"}
    assert [b["text"] for b in payload["system"]] == [m["content"] for m in prompt[:2]]
    assert all(b["cache_control"] == ephemeral for b in payload["system"])
    messages = payload["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"][-1]["cache_control"] == ephemeral
    assert all(
        "cache_control" not in block
        for m in (messages[0], messages[2])
        for block in (m["content"] if isinstance(m["content"], list) else [])
    )
    marked = str(payload).count("cache_control")
    assert marked == 3  # Anthropic allows four


def test_openai_requests_get_one_system_message_and_no_markers() -> None:
    responder = build_responder(
        Settings(llm="openai-compatible", openai_base_url="http://127.0.0.1:9/v1")
    )
    prompt = [
        ChatMessage(role="system", content="You are Threadline."),
        ChatMessage(role="system", content="Summary: things."),
        ChatMessage(role="user", content="Question?"),
    ]
    assert isinstance(responder, ChatModelResponder)
    messages = responder.messages(prompt)
    assert [m.type for m in messages] == ["system", "human"]
    assert messages[0].content == "You are Threadline.\n\nSummary: things."


@pytest.mark.parametrize("agent_tools", [False, True], ids=["always-retrieve", "tool-calling"])
async def test_a_streamed_turn_records_cached_tokens_too(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, agent_tools: bool
) -> None:
    _tenant, _user, chat, owner = await make_chatter(client, db)
    with fake_llm_server(words=3, token_delay=0) as url:
        settings = app.state.resources.settings
        configured = settings.model_copy(
            update={"llm": "openai-compatible", "openai_base_url": url}
        )
        app.state.resources.turn_context.responder = build_responder(configured)
        app.state.resources.turn_context.settings = configured.model_copy(
            update={"agent_tools": agent_tools}
        )
        body = {"session_id": str(chat.id), "message": question(1)}
        response, events, _ = await stream_chat(client, owner.headers, body)
    assert response.status_code == 200
    done = next(e for e in events if e.name == "done").data
    assert done["triage"]["route"] == ("tools" if agent_tools else "llm")
    assert done["usage"]["cached_prompt_tokens"] == CACHED_PROMPT_TOKENS
    # Both paths record what the cache served and what it stored (none: OpenAI's is free).
    assert done["context_metadata"]["prompt_cache"] == {
        "cached_prompt_tokens": CACHED_PROMPT_TOKENS,
        "cache_write_tokens": 0,
    }
