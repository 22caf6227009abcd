"""Chat-model providers, chosen by `THREADLINE_LLM` (SPEC §6)."""

from __future__ import annotations

from app.config import Settings
from app.embeddings.base import Embedder
from app.llm.responder import ChatModelResponder, ExtractiveResponder, Responder

DEFAULT_MODELS = {
    "openai": "gpt-4o-mini",
    "anthropic": "claude-3-5-haiku-latest",
    "openai-compatible": "default",
}


class ProviderConfigError(RuntimeError):
    """The configured model provider cannot be built (unknown name, missing key or package)."""

    pass


def build_fast_responder(settings: Settings) -> Responder | None:
    """The provider with `THREADLINE_LLM_FAST_MODEL` (the follow-up rewrite's model), or None
    when it is not set or there is no model at all."""
    if settings.llm == "extractive" or not settings.llm_fast_model:
        return None
    return build_responder(settings, model=settings.llm_fast_model)


def build_responder(
    settings: Settings, *, model: str | None = None, embedder: Embedder | None = None
) -> Responder:
    """The configured provider (with `model` instead of `THREADLINE_LLM_MODEL` if given), or
    the offline extractive responder (choosing sentences by meaning too, given `embedder`)."""
    if settings.llm == "extractive":
        return ExtractiveResponder(embedder=embedder)
    model = model or settings.llm_model or DEFAULT_MODELS[settings.llm]
    if settings.llm in ("openai", "openai-compatible"):
        from langchain_openai import ChatOpenAI

        from app.llm.openai_messages import PlainMessageCompletions

        if settings.llm == "openai-compatible" and not settings.openai_base_url:
            raise ProviderConfigError("THREADLINE_LLM=openai-compatible needs OPENAI_BASE_URL")
        if settings.llm == "openai" and settings.openai_api_key is None:
            raise ProviderConfigError("THREADLINE_LLM=openai needs OPENAI_API_KEY")
        api_key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else "none"
        chat = ChatOpenAI(
            model=model,
            api_key=api_key,
            base_url=settings.openai_base_url,
            temperature=settings.llm_temperature,
            max_completion_tokens=settings.llm_max_tokens,
            timeout=settings.llm_timeout_seconds,
            stream_usage=True,
            max_retries=2,
            # Silence between chunks is bounded by the completions below, without a task a
            # chunk (app/llm/openai_stream.py).
            stream_chunk_timeout=None,
        )
        chat.async_client = PlainMessageCompletions(
            chat.root_async_client, silence_seconds=settings.llm_timeout_seconds
        )
        return ChatModelResponder(chat, model)
    from langchain_anthropic import ChatAnthropic

    if settings.anthropic_api_key is None:
        raise ProviderConfigError("THREADLINE_LLM=anthropic needs ANTHROPIC_API_KEY")
    anthropic = ChatAnthropic(
        model=model,
        api_key=settings.anthropic_api_key,
        temperature=settings.llm_temperature,
        max_tokens=settings.llm_max_tokens,
        timeout=settings.llm_timeout_seconds,
        max_retries=2,
    )
    # Anthropic caches a prompt's prefix only up to explicit breakpoints (ADR 0035).
    return ChatModelResponder(anthropic, model, cache_breakpoints=True)
