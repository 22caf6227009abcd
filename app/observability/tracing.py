"""LangSmith tracing of chat turns, only when configured, with PII redacted before sending.

With `LANGSMITH_TRACING` true and `LANGSMITH_API_KEY` set, each turn's graph run goes to
LangSmith as one run tree (LangGraph makes one child run per node) carrying the session,
the tenant and a pseudonymous user id (an HMAC of the user id: stable, not reversible without
the server's secret). Inputs and outputs pass through the PII anonymiser on their way out.
Otherwise no tracer exists and nothing is sent: LangChain's own environment-driven tracer is
switched off so it cannot send unredacted runs behind our back.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import os
from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tracers.langchain import LangChainTracer
from langsmith import Client
from pydantic import BaseModel

from app.config import Settings
from app.pii.detect import anonymize


def redact(value: Any, pseudonym: Callable[[str], str]) -> Any:
    """The value with every string anonymised and user ids pseudonymised (recursively
    through dicts, lists, models and dataclasses: a node's update carries manifest sections
    and planned queries, which the tracer would send as their fields)."""
    if isinstance(value, BaseModel):
        return redact(value.model_dump(mode="json"), pseudonym)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return redact(dataclasses.asdict(value), pseudonym)
    if isinstance(value, str):
        return anonymize(value).text
    if isinstance(value, Mapping):
        return {
            key: pseudonym(str(item)) if key == "user_id" else redact(item, pseudonym)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(item, pseudonym) for item in value]
    return value


class Tracing:
    """Sends turns to LangSmith with personal data redacted and users pseudonymised."""

    def __init__(self, settings: Settings) -> None:
        assert settings.langsmith_api_key is not None
        self._secret = settings.jwt_signing_key().encode()
        self.client = Client(
            api_url=settings.langsmith_endpoint,
            api_key=settings.langsmith_api_key.get_secret_value(),
            hide_inputs=self._redact,
            hide_outputs=self._redact,
            auto_batch_tracing=False,  # one request per run: no background batching thread
        )
        self.project = settings.langsmith_project

    def _redact(self, fields: dict[str, Any]) -> dict[str, Any]:
        redacted: dict[str, Any] = redact(fields, self.pseudonym)
        return redacted

    def pseudonym(self, user_id: str) -> str:
        """A stable keyed hash standing for a user id in traces."""
        return hmac.new(self._secret, user_id.encode(), hashlib.sha256).hexdigest()[:16]

    def config_for(self, tenant_id: str, session_id: str, user_id: str) -> RunnableConfig:
        """The run config that traces one turn under its session, tenant and pseudonymous user."""
        tracer = LangChainTracer(project_name=self.project, client=self.client)
        return {
            "callbacks": [tracer],
            "run_name": "chat_turn",
            "metadata": {
                "session_id": session_id,
                "tenant_id": tenant_id,
                "user": self.pseudonym(user_id),
            },
        }


def build_tracing(settings: Settings) -> Tracing | None:
    """LangSmith tracing when configured, else None (and LangChain's own tracing switched off)."""
    if settings.langsmith_tracing and settings.langsmith_api_key is not None:
        return Tracing(settings)
    # LangChain traces on its own when these variables are set; we trace only through the
    # redacting tracer above, so keep the ambient one off.
    for name in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGCHAIN_TRACING"):
        os.environ.pop(name, None)
    return None
