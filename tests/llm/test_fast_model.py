"""THREADLINE_LLM_FAST_MODEL: the follow-up rewrite's model, built by the same provider."""

from __future__ import annotations

import pytest
from langchain_openai import ChatOpenAI

from app.config import Settings
from app.llm.providers import build_fast_responder, build_responder
from app.llm.responder import ChatModelResponder

BASE_URL = "http://127.0.0.1:11434/v1"


def compatible(model: str, fast_model: str | None = None) -> Settings:
    return Settings(
        llm="openai-compatible",
        openai_base_url=BASE_URL,
        llm_model=model,
        llm_fast_model=fast_model,
    )


def test_the_fast_model_is_the_same_provider_with_its_own_model_name() -> None:
    settings = compatible("llama3-70b", "llama3-8b")
    fast = build_fast_responder(settings)
    assert isinstance(fast, ChatModelResponder)
    assert isinstance(fast.model, ChatOpenAI)
    assert fast.model.model_name == "llama3-8b"
    assert fast.model_name == "llama3-8b"
    assert build_responder(settings).model_name == "llama3-70b"  # the answer keeps its model


def test_without_a_fast_model_or_without_any_model_there_is_none() -> None:
    assert build_fast_responder(compatible("llama3-70b")) is None
    assert build_fast_responder(Settings(llm_fast_model="small")) is None  # extractive


def test_the_setting_is_read_from_its_environment_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THREADLINE_LLM_FAST_MODEL", "gpt-4o-mini")
    assert Settings().llm_fast_model == "gpt-4o-mini"
