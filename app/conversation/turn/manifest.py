"""A turn's manifest: how its context was built and checked, stored with its row
(`query_history.context_metadata`), returned by `/chat` and read by the admin audit.

The JSON stays flat, as every stored row and every client already has it; the model names its
sections (`SECTIONS`: retrieval, sources, citations, history, summary, budget, triage,
validation, prompt cache, tools, timings), each a mixin of the fields it owns, and the JSON
Schema lists them under `x-sections`. Every field is optional: each ending of a turn (an early
answer, a complete one, a stopped, failed or orphaned one) records the sections it reached.
A manifest serialises exactly the fields that were set, and keeps keys it does not know (a row
written by an older or newer release), so reading and writing a row never changes it.

Versions (`query_history.manifest_version`): 1 (NULL in the row) is the untyped dict written
before this model existed; 2 is written through it. Both read with `Manifest.read`.
"""

from __future__ import annotations

import uuid
from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, JsonValue

from app.conversation.turn.manifest_records import (
    AccessRecord,
    Citations,
    Classification,
    Dropped,
    ManifestSource,
    OutputAudit,
    PromptCache,
    Record,
    RetrievalRecord,
    Rewrite,
    SourceDistribution,
    SummaryRecord,
    ToolsRecord,
    TriageRecord,
    Truncation,
    TurnError,
    UnavailableAttachment,
    Validation,
)
from app.core.json_types import JsonObject

MANIFEST_VERSION = 2
"""The version a turn's row records for the manifest it stores (ADR 0066)."""
LEGACY_VERSION = 1
"""The version of a row without one: written before the manifest had a schema."""


# --- the sections ---------------------------------------------------------------------------


class RetrievalSection(Record):
    """retrieval: how the question was read and what was searched."""

    query_composition: Literal["pure_kb", "pure_doc", "hybrid", "chat"] | None = None
    composition_confidence: float | None = None
    is_follow_up: bool | None = None
    reformulated_query: str | None = None
    classification: Classification | None = None
    rewrite: Rewrite | None = None
    relatedness: dict[str, float | bool] | None = None
    retrieval: RetrievalRecord | None = None
    access: AccessRecord | None = None
    active_attachment_ids: list[uuid.UUID] | None = None
    attachments_unavailable: list[UnavailableAttachment] | None = None


class SourcesSection(Record):
    """sources: the prompt's numbered sources."""

    sources: list[ManifestSource] | None = None


class CitationsSection(Record):
    """citations: which sources the answer cites."""

    citations: Citations | None = None


class HistorySection(Record):
    """history: the earlier turns in the prompt and where they were read from."""

    history_source: str | None = None
    history_turns_included: int | None = None
    history_turn_ids: list[str] | None = None
    """The stored turns' ids, and `client-<n>` for the turns the client sent."""


class SummarySection(Record):
    """summary: the session's running summary in the prompt."""

    summary: SummaryRecord | None = None
    summary_included: bool | None = None


class BudgetSection(Record):
    """budget: the token budget, what it cut, and the context's quality."""

    token_budget: int | None = None
    token_count: int | None = None
    truncation_applied: bool | None = None
    truncated: list[Truncation] | None = None
    dropped: list[Dropped] | None = None
    source_distribution: SourceDistribution | None = None
    stable_prefix_messages: int | None = None
    quality_score: float | None = None


class TriageSection(Record):
    """triage: the input guardrail's and triage's record."""

    triage: TriageRecord | None = None


class ValidationSection(Record):
    """validation: the output checks (and, for the admin audit only, the altered original)."""

    validation: Validation | None = None
    audit: OutputAudit | None = None


class PromptCacheSection(Record):
    """prompt cache: the model that answered and its prompt cache."""

    model: str | None = None
    prompt_cache: PromptCache | None = None


class ToolsSection(Record):
    """tools: the agent's tool calls."""

    tools: ToolsRecord | None = None


class TimingsSection(Record):
    """timings: the turn's latency, and why it ended early if it did."""

    latency_ms: int | None = None
    error: TurnError | None = None


SECTIONS: dict[str, type[Record]] = {
    "retrieval": RetrievalSection,
    "sources": SourcesSection,
    "citations": CitationsSection,
    "history": HistorySection,
    "summary": SummarySection,
    "budget": BudgetSection,
    "triage": TriageSection,
    "validation": ValidationSection,
    "prompt_cache": PromptCacheSection,
    "tools": ToolsSection,
    "timings": TimingsSection,
}


class Manifest(
    RetrievalSection,
    SourcesSection,
    CitationsSection,
    HistorySection,
    SummarySection,
    BudgetSection,
    TriageSection,
    ValidationSection,
    PromptCacheSection,
    ToolsSection,
    TimingsSection,
):
    """How a turn's context was built and checked (see the module docstring): its sections'
    fields side by side, as stored and returned."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "x-sections": {name: list[JsonValue](s.model_fields) for name, s in SECTIONS.items()},
            "x-version": MANIFEST_VERSION,
        },
    )
    PRIVATE: ClassVar[frozenset[str]] = frozenset({"audit"})
    """Fields only the admin audit sees."""

    @classmethod
    def read(cls, data: Any, version: int | None = None) -> Manifest:
        """A stored manifest of any version (`version` None: a row from before versions, read
        as version 1 with what it has)."""
        if (version or LEGACY_VERSION) > MANIFEST_VERSION:
            raise ValueError(f"manifest version {version} is newer than this release reads")
        return cls.model_validate(data or {})

    def public(self) -> Manifest:
        """The manifest as the turn's user sees it: without the admin audit's part."""
        data = self.dump()
        return Manifest.model_validate({k: v for k, v in data.items() if k not in self.PRIVATE})

    def merged(self, update: Record | JsonObject) -> Manifest:
        """This manifest with `update`'s fields added (each replacing the same field): a
        section, another manifest, or stored data."""
        more = update.dump() if isinstance(update, Record) else update
        return Manifest.model_validate({**self.dump(), **more})
