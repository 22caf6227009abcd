"""The app under benchmark: the real Threadline app with a zero-latency fake model, plus the
baseline endpoint doing only the irreducible work of a turn (authenticate, read the session,
write one row)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import psutil
from fastapi import FastAPI
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import BaseModel

from app.auth.principal import CurrentPrincipal
from app.config import get_settings
from app.conversation.service import sessions
from app.core.deps import DbSession
from app.llm.responder import ChatModelResponder
from app.main import create_app
from app.models import QueryHistory

ANSWER = "Threadline answers from your documents [1]. " * 5


class InstantModel(BaseChatModel):
    """Answers at once, streaming one chunk per word: the LLM's cost is zero."""

    @property
    def _llm_type(self) -> str:
        return "instant"

    def _generate(self, messages: list[BaseMessage], *_: Any, **__: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage(ANSWER))])

    async def _agenerate(self, messages: list[BaseMessage], *_: Any, **__: Any) -> ChatResult:
        # A native async call, as real providers have (the default would hop to a thread).
        return self._generate(messages)

    def _stream(
        self, messages: list[BaseMessage], *_: Any, **__: Any
    ) -> Iterator[ChatGenerationChunk]:
        raise NotImplementedError

    async def _astream(
        self, messages: list[BaseMessage], *_: Any, **__: Any
    ) -> AsyncIterator[ChatGenerationChunk]:
        for word in ANSWER.split(" "):
            yield ChatGenerationChunk(message=AIMessageChunk(content=word + " "))


class BaselineRequest(BaseModel):
    session_id: uuid.UUID
    message: str


def app_with_model(model: BaseChatModel, name: str) -> FastAPI:
    """The real app, whose turns are answered by `model` (swapped in once the lifespan has
    built the resources)."""
    app = create_app(get_settings())
    lifespan = app.router.lifespan_context

    @asynccontextmanager
    async def with_model(application: FastAPI) -> AsyncIterator[None]:
        async with lifespan(application):
            context = application.state.resources.turn_context
            context.responder = ChatModelResponder(model, name)
            yield

    app.router.lifespan_context = with_model
    return app


def factory() -> FastAPI:
    """The app with the instant model, and the baseline endpoint."""
    return with_baseline(app_with_model(InstantModel(), "instant"))


def baseline_factory() -> FastAPI:
    """The app as its settings configure it (bench.turn_cost: the real provider), and the
    baseline endpoint."""
    return with_baseline(create_app(get_settings()))


def with_baseline(app: FastAPI) -> FastAPI:
    """`app` with `POST /bench/baseline`: the irreducible work of a turn."""

    @app.post("/bench/baseline")
    async def baseline(
        body: BaselineRequest, principal: CurrentPrincipal, db: DbSession
    ) -> dict[str, str]:
        await sessions.get_owned(db, principal, body.session_id)
        turn = QueryHistory(
            tenant_id=principal.tenant_id,
            session_id=body.session_id,
            user_id=principal.user_id,
            user_query=body.message,
            answer=ANSWER,
            status="complete",
        )
        db.add(turn)
        await db.flush()
        return {"turn_id": str(turn.id)}

    return app


class PacedModel(InstantModel):
    """50 tokens, one every 20 ms: a model that takes a second to answer."""

    async def _astream(
        self, messages: list[BaseMessage], *_: Any, **__: Any
    ) -> AsyncIterator[ChatGenerationChunk]:
        for i in range(50):
            await asyncio.sleep(0.02)
            yield ChatGenerationChunk(message=AIMessageChunk(content=f"word{i} "))


def streaming_factory() -> FastAPI:
    """The app with the paced model, and a probe of the process's own resources."""
    app = app_with_model(PacedModel(), "paced")

    @app.get("/bench/process")
    async def process() -> dict[str, int]:
        me = psutil.Process()
        established = [c for c in me.net_connections("inet") if c.status == "ESTABLISHED"]
        listening = {c.laddr.port for c in me.net_connections("inet") if c.status == "LISTEN"}
        clients = [c for c in established if c.laddr.port in listening]
        redis = [c for c in established if c.raddr and c.raddr.port == 6379]
        return {
            "rss_bytes": me.memory_info().rss,
            "http_client_connections": len(clients),
            "redis_connections": len(redis),
            "other_tcp_connections": len(established) - len(clients) - len(redis),
            "open_files": me.num_fds(),
            "asyncio_tasks": len(asyncio.all_tasks()),
            "live_runs": len(app.state.resources.guards.streams.runs),
        }

    return app


class SlowModel(InstantModel):
    """400 tokens, one every 50 ms: a turn that streams for 20 s (something to follow)."""

    async def _astream(
        self, messages: list[BaseMessage], *_: Any, **__: Any
    ) -> AsyncIterator[ChatGenerationChunk]:
        for i in range(400):
            await asyncio.sleep(0.05)
            yield ChatGenerationChunk(message=AIMessageChunk(content=f"word{i} "))


def slow_factory() -> FastAPI:
    """The app with the slow model (bench.attacks)."""
    return app_with_model(SlowModel(), "slow")
