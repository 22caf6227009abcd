"""The one fake: a LangChain chat model at the provider boundary.

`ScriptedChatModel` answers through a function of the messages it receives, records every call,
streams word by word, and can pause between tokens or fail part-way — what a real provider
does, without the network.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

from app.llm.responder import ChatModelResponder


class ProviderError(RuntimeError):
    pass


class ScriptedChatModel(BaseChatModel):
    reply: Callable[[list[BaseMessage]], str]
    calls: list[list[BaseMessage]] = Field(default_factory=list)
    token_delay: float = 0.0
    fail_after_tokens: int | None = None
    tokens_streamed: int = 0
    tokens_generated: int = 0
    """Answer tokens produced so far, streamed or not."""
    whole_answers: int = 0
    """Answers asked for in one call (not streamed)."""

    @property
    def _llm_type(self) -> str:
        return "scripted-fake"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=AIMessage(self.reply(messages)))])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        """One call for the whole reply. An answer (the generate node's call for `/chat`)
        takes as long as streaming it would and fails where the stream would; rewrites and
        summaries answer at once, as with `_generate`."""
        if not _is_answer_prompt(messages):
            return self._generate(messages, stop, None, **kwargs)
        self.calls.append(list(messages))
        self.whole_answers += 1
        pieces = [piece async for piece in self._pieces(messages)]
        return ChatResult(generations=[ChatGeneration(message=AIMessage("".join(pieces)))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        raise NotImplementedError("async only")

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        self.calls.append(list(messages))
        async for piece in self._pieces(messages):
            self.tokens_streamed += 1
            yield ChatGenerationChunk(message=AIMessageChunk(content=piece))

    async def _pieces(self, messages: list[BaseMessage]) -> AsyncIterator[str]:
        """The reply word by word, at the provider's pace, failing where it is told to."""
        for index, piece in enumerate(re.split(r"(?<=\s)", self.reply(messages))):
            if self.fail_after_tokens is not None and index >= self.fail_after_tokens:
                raise ProviderError("the provider closed the stream")
            if self.token_delay:
                await asyncio.sleep(self.token_delay)
            self.tokens_generated += 1
            yield piece

    def answer_prompts(self) -> list[list[BaseMessage]]:
        """The calls that generated answers (not rewrites or summaries)."""
        return [c for c in self.calls if _is_answer_prompt(c)]


def _is_answer_prompt(messages: Sequence[BaseMessage]) -> bool:
    return bool(messages) and "You are Threadline" in str(messages[0].content)


ToolCall = tuple[str, dict[str, Any]]


class ToolCallingChatModel(ScriptedChatModel):
    """A scripted model that supports tool calling, as OpenAI's and Anthropic's do.

    With tools bound, `plan(messages)` decides: a list of (tool name, arguments) is streamed
    as tool calls; None lets the model answer with `reply`. Without tools bound (the loop
    guard's last call) it always answers.
    """

    plan: Callable[[list[BaseMessage]], list[ToolCall] | None]
    tools_offered: list[bool] = Field(default_factory=list)
    """Per call: whether tools were bound."""

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: str | None = None, **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        offered = bool(kwargs.get("tools"))
        self.tools_offered.append(offered)
        planned = self.plan(messages) if offered else None
        if planned:
            self.calls.append(list(messages))
            chunks = [
                {
                    "name": name,
                    "args": json.dumps(args),
                    "id": f"call-{len(self.calls)}-{i}",
                    "index": i,
                }
                for i, (name, args) in enumerate(planned)
            ]
            yield ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=chunks))
            return
        async for chunk in super()._astream(messages, stop, run_manager, **kwargs):
            yield chunk

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        """One call (`/chat`): the same plan as a stream, as tool calls or the whole answer."""
        offered = bool(kwargs.get("tools"))
        self.tools_offered.append(offered)
        planned = self.plan(messages) if offered else None
        if planned:
            self.calls.append(list(messages))
            calls = [
                {"name": name, "args": args, "id": f"call-{len(self.calls)}-{i}"}
                for i, (name, args) in enumerate(planned)
            ]
            message = AIMessage(content="", tool_calls=calls)
            return ChatResult(generations=[ChatGeneration(message=message)])
        return await super()._agenerate(messages, stop, run_manager, **kwargs)


def responder(model: ScriptedChatModel) -> ChatModelResponder:
    return ChatModelResponder(model, "scripted-fake")


def text_of(messages: list[BaseMessage]) -> str:
    return "\n".join(str(m.content) for m in messages)
