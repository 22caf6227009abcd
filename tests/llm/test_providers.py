"""Providers are chosen by THREADLINE_LLM; a misconfiguration is a clear error at start-up."""

from __future__ import annotations

import pytest
from langchain_anthropic import ChatAnthropic
from langchain_openai import ChatOpenAI

from app.config import Settings
from app.llm.providers import ProviderConfigError, build_responder
from app.llm.responder import ChatModelResponder, ExtractiveResponder


def test_without_a_provider_the_extractive_responder_answers() -> None:
    assert isinstance(build_responder(Settings()), ExtractiveResponder)


def test_openai_compatible_servers_are_reached_through_their_base_url() -> None:
    settings = Settings(
        llm="openai-compatible", openai_base_url="http://127.0.0.1:11434/v1", llm_model="llama3"
    )
    responder = build_responder(settings)
    assert isinstance(responder, ChatModelResponder)
    assert isinstance(responder.model, ChatOpenAI)
    assert str(responder.model.openai_api_base) == "http://127.0.0.1:11434/v1"
    assert responder.model_name == "llama3"


def test_openai_and_anthropic_use_their_integrations() -> None:
    openai = build_responder(Settings(llm="openai", openai_api_key="sk-test"))
    anthropic = build_responder(Settings(llm="anthropic", anthropic_api_key="sk-ant-test"))
    assert isinstance(openai, ChatModelResponder)
    assert isinstance(openai.model, ChatOpenAI)
    assert isinstance(anthropic, ChatModelResponder)
    assert isinstance(anthropic.model, ChatAnthropic)


@pytest.mark.parametrize(
    ("llm", "missing"),
    [
        ("openai", "OPENAI_API_KEY"),
        ("anthropic", "ANTHROPIC_API_KEY"),
        ("openai-compatible", "OPENAI_BASE_URL"),
    ],
)
def test_a_provider_without_its_credentials_is_refused(llm: str, missing: str) -> None:
    with pytest.raises(ProviderConfigError, match=missing):
        build_responder(Settings(llm=llm))
