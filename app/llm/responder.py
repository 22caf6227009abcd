"""Responders: what the generate node (and the follow-up rewriter) talk to.

`ChatModelResponder` wraps any LangChain chat model (OpenAI, Anthropic, OpenAI-compatible, or a
fake in tests). `ExtractiveResponder` needs no model: it answers from the retrieved passages
with numbered citations, and says that it is extractive.

Prompt caching (ADR 0035): the prompt starts with what stays the same from turn to turn. OpenAI
caches such a prefix by itself; Anthropic caches only up to `cache_control` breakpoints, which
`to_langchain` marks when asked. Each call's usage records how many prompt tokens the provider
read from its cache (`cached_prompt_tokens`).

Over 300 lines: both responders and the request, usage and message shapes they share; how
the extractive one reads and chooses sentences is in `app.llm.sentences`.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from app.embeddings.base import Embedder
from app.llm import sentences as sentences_module
from app.llm.sentences import DEFAULT_LANGUAGE
from app.llm.shapes import ChatMessage, HistoryTurn, SourceRef
from app.llm.tokens import count_tokens


@dataclass
class Generation:
    """Usage of the last answer, filled while it is generated."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    """Prompt tokens the provider read from its prompt cache (included in prompt_tokens)."""
    cache_write_tokens: int = 0
    """Prompt tokens the provider wrote to its cache (Anthropic; included in prompt_tokens)."""
    text: list[str] = field(default_factory=list)

    def add_usage(self, usage: Mapping[str, Any]) -> None:
        """Add a LangChain `usage_metadata` (one call's, or one chunk's) to the counts."""
        self.prompt_tokens += int(usage.get("input_tokens", 0) or 0)
        self.completion_tokens += int(usage.get("output_tokens", 0) or 0)
        cached, written = cache_tokens(usage)
        self.cached_prompt_tokens += cached
        self.cache_write_tokens += written

    def count(self, prompt: Sequence[ChatMessage]) -> None:
        """Usage counted with the tokenizer: for providers that report none, and offline."""
        self.prompt_tokens = sum(count_tokens(m["content"]) for m in prompt)
        self.completion_tokens = count_tokens("".join(self.text))


@dataclass(frozen=True, kw_only=True)
class ModelRequest:
    """What a responder answers: the prompt for a model, and what an extractive answer is
    composed from (the numbered sources, the earlier turns and the question)."""

    prompt: Sequence[ChatMessage]
    sources: Sequence[SourceRef]
    history: Sequence[HistoryTurn]
    query: str
    follow_up_query: str = ""
    """A follow-up's standalone query (its words and the conversation's); empty otherwise."""
    language: str = DEFAULT_LANGUAGE
    """The tenant's text-search language (a PostgreSQL configuration's name, ADR 0076): the
    extractive responder matches words by their stems in it."""


class Responder(Protocol):
    """What the generate node (and the follow-up rewriter) talk to."""

    model_name: str
    uses_language_model: bool
    cache_breakpoints: bool
    """Whether prompts get `cache_control` breakpoints (Anthropic)."""

    def stream(self, request: ModelRequest, generation: Generation) -> AsyncIterator[str]:
        """Yield the answer's text deltas; record usage in `generation`."""
        ...

    async def answer(self, request: ModelRequest, generation: Generation) -> str:
        """The whole answer in one call (nobody watches it arrive); usage in `generation`."""
        ...

    async def complete(self, prompt: Sequence[ChatMessage]) -> str | None:
        """One non-streamed completion (rewrites, summaries); None without a model."""
        ...


def cache_tokens(usage: Mapping[str, Any] | None) -> tuple[int, int]:
    """Prompt tokens read from and written to the provider's cache, from a LangChain
    `usage_metadata`: `input_token_details.cache_read` (OpenAI's
    `prompt_tokens_details.cached_tokens`, Anthropic's `cache_read_input_tokens`) and
    `cache_creation` (Anthropic's `cache_creation_input_tokens`)."""
    details = (usage or {}).get("input_token_details") or {}
    return int(details.get("cache_read", 0) or 0), int(details.get("cache_creation", 0) or 0)


CACHE_CONTROL = {"type": "ephemeral"}
_MESSAGE = {"user": HumanMessage, "assistant": AIMessage, "system": SystemMessage}


def _marked(text: str) -> list[str | dict[Any, Any]]:
    return [{"type": "text", "text": text, "cache_control": dict(CACHE_CONTROL)}]


def to_langchain(
    messages: Sequence[ChatMessage], *, cache_breakpoints: bool = False
) -> list[BaseMessage]:
    """The prompt as LangChain messages.

    The leading system messages (the instructions, then the running summary) become one system
    message, as Anthropic accepts only one. With `cache_breakpoints` (Anthropic), each of them
    and the newest history message (the one before the question) end with a `cache_control`
    breakpoint: three of the four Anthropic allows, each the end of a prefix the next turn
    repeats."""
    lead = 0
    while lead < len(messages) and messages[lead]["role"] == "system":
        lead += 1
    converted: list[BaseMessage] = []
    if lead:
        system = [m["content"] for m in messages[:lead]]
        if cache_breakpoints:
            converted.append(SystemMessage(content=[b for text in system for b in _marked(text)]))
        else:
            converted.append(SystemMessage(content="\n\n".join(system)))
    rest = messages[lead:]
    for index, message in enumerate(rest):
        kind = _MESSAGE[message["role"]]
        if cache_breakpoints and index == len(rest) - 2:
            converted.append(kind(content=_marked(message["content"])))
        else:
            converted.append(kind(content=message["content"]))
    return converted


class ChatModelResponder:
    """Answers with a LangChain chat model, streamed or in one call."""

    uses_language_model = True

    def __init__(
        self, model: BaseChatModel, model_name: str, *, cache_breakpoints: bool = False
    ) -> None:
        self.model = model
        self.model_name = model_name
        self.cache_breakpoints = cache_breakpoints

    def messages(self, prompt: Sequence[ChatMessage]) -> list[BaseMessage]:
        """The prompt as this provider's LangChain messages (with its cache breakpoints)."""
        return to_langchain(prompt, cache_breakpoints=self.cache_breakpoints)

    async def stream(self, request: ModelRequest, generation: Generation) -> AsyncIterator[str]:
        """Stream the model's answer, counting its tokens."""
        reported = False
        async for chunk in self.model.astream(self.messages(request.prompt)):
            usage = getattr(chunk, "usage_metadata", None)
            if usage:
                generation.add_usage(usage)
                reported = True
            text = chunk.text
            if text:
                generation.text.append(text)
                yield text
        if not reported:  # providers that do not report usage: count it ourselves
            generation.count(request.prompt)

    async def answer(self, request: ModelRequest, generation: Generation) -> str:
        """The model's whole answer in one call, counting its tokens."""
        # One call instead of a stream: per-chunk work (callbacks, merging chunks, one event
        # each) was most of a turn's own cost with a fast model, for text nobody watched.
        message = await self.model.ainvoke(self.messages(request.prompt))
        text = message.text
        generation.text.append(text)
        usage = getattr(message, "usage_metadata", None)
        if usage:
            generation.add_usage(usage)
        else:
            generation.count(request.prompt)
        return text

    async def complete(self, prompt: Sequence[ChatMessage]) -> str | None:
        """The model's reply to a prompt outside a turn (None if empty)."""
        result = await self.model.ainvoke(self.messages(prompt))
        return result.text.strip() or None


EXTRACTIVE_NOTICE = "Extractive answer (no language model is configured): "
NO_SOURCES = (
    "Extractive answer (no language model is configured): I found nothing in the knowledge "
    "base or the attached documents that answers this."
)


def _best_sentences(text: str, terms: set[str], limit: int, language: str) -> list[str]:
    """The passage's sentences that answer the question best by the stems they share with
    it (none if none does; `app.llm.sentences`)."""
    found = sentences_module.sentences(text)
    return [s.text for s in sentences_module.best(found, terms, limit, language=language)]


def _location(source: SourceRef) -> str | None:
    """Where a source's passage is, in words, when it carries a location."""
    location = cast(Mapping[str, Any], source).get("location")
    return sentences_module.describe_location(source["title"], location)


class ExtractiveResponder:
    """Composes an answer from the best sentences of the sources, each cited `[n]`."""

    model_name = "extractive"
    uses_language_model = False
    cache_breakpoints = False

    def __init__(
        self,
        max_sources: int = 3,
        sentences_per_source: int = 2,
        *,
        embedder: Embedder | None = None,
    ) -> None:
        self.max_sources = max_sources
        self.sentences_per_source = sentences_per_source
        self.embedder = embedder
        """Compares sentences with the question by meaning; None: by their words alone."""

    async def similarities(
        self, sources: Sequence[SourceRef], query: str
    ) -> dict[str, float] | None:
        """Each candidate sentence's cosine to the question, or None without an embedder."""
        if self.embedder is None:
            return None
        texts = [source["text"] for source in list(sources)[: self.max_sources]]
        return await sentences_module.similarities(self.embedder, query, texts)

    def compose(
        self,
        sources: Sequence[SourceRef],
        history: Sequence[HistoryTurn],
        query: str,
        follow_up_query: str = "",
        similarities: Mapping[str, float] | None = None,
        language: str = DEFAULT_LANGUAGE,
    ) -> str:
        """The answer: the sentences of the sources that answer the question (by its words'
        stems, and by meaning given `similarities`), else a follow-up's standalone query
        ("How long does it take?" names nothing the sources say; "erase data how long does
        it take" does); else of earlier turns. A quote from a source that knows its location
        says where it is from ("Refund policy, page 12, section 3 Refunds: …")."""

        def terms_of(text: str) -> set[str]:
            return sentences_module.question_stems(text, language)

        terms = terms_of(query)
        attempts = [terms, terms | terms_of(follow_up_query)] if follow_up_query else [terms]
        considered = list(sources)[: self.max_sources]
        read = [sentences_module.sentences(source["text"]) for source in considered]
        for words in attempts:
            parts: list[str] = []
            answers = sentences_module.chosen(
                read, words, self.sentences_per_source, similarities, language
            )
            for source, found in zip(considered, answers, strict=True):
                sentences = [sentence.text for sentence in found]
                if sentences:
                    where = _location(source)
                    quoted = f"{' '.join(sentences)} [{source['n']}]"
                    parts.append(f"{where}: {quoted}" if where else quoted)
            if parts:
                return EXTRACTIVE_NOTICE + "\n\n".join(parts)
        # A conversational turn: what was said earlier that matches the question.
        for turn in reversed(history):
            sentences = _best_sentences(turn["answer"], terms, 2, language)
            if sentences and terms_of(" ".join(sentences)) & terms:
                return (
                    EXTRACTIVE_NOTICE
                    + "earlier in this conversation: "
                    + " ".join(s.removeprefix(EXTRACTIVE_NOTICE) for s in sentences)
                )
        return NO_SOURCES

    async def stream(self, request: ModelRequest, generation: Generation) -> AsyncIterator[str]:
        """Stream the composed answer word by word."""
        answer = self.compose(
            request.sources,
            request.history,
            request.query,
            request.follow_up_query,
            await self.similarities(request.sources, request.query),
            request.language,
        )
        generation.prompt_tokens = sum(count_tokens(m["content"]) for m in request.prompt)
        for piece in re.findall(r"\s*\S+\s*", answer):  # a word with its spacing per delta
            generation.text.append(piece)
            yield piece
        generation.count(request.prompt)

    async def answer(self, request: ModelRequest, generation: Generation) -> str:
        """The composed answer in one piece."""
        text = self.compose(
            request.sources,
            request.history,
            request.query,
            request.follow_up_query,
            await self.similarities(request.sources, request.query),
            request.language,
        )
        generation.text.append(text)
        generation.count(request.prompt)
        return text

    async def complete(self, prompt: Sequence[ChatMessage]) -> str | None:
        """None: without a language model there is nothing to complete."""
        return None
