"""The parts of a turn's manifest (`manifest.py`): each a record that serialises the fields
that were set, and keeps keys it does not know."""

from __future__ import annotations

import uuid
from typing import Any, Literal, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    GetJsonSchemaHandler,
    SerializerFunctionWrapHandler,
    model_serializer,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from app.core.json_types import JsonObject
from app.core.location import Location


class Record(BaseModel):
    """A part of the manifest: serialises the fields that were set (and unknown keys it
    read), never a default nobody wrote."""

    model_config = ConfigDict(extra="allow")

    @model_serializer(mode="wrap")
    def _as_written(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        written = self.model_fields_set | set(self.__pydantic_extra__ or ())
        return {k: v for k, v in data.items() if k in written}

    def dump(self) -> JsonObject:
        """The record as JSON-able data (the fields that were set), as stored."""
        return self.model_dump(mode="json")

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        # The serializer only leaves out what was not set: the serialised shape is the
        # model's own (not `{}`, which is what a function serializer would publish).
        fields = cast(CoreSchema, {k: v for k, v in core_schema.items() if k != "serialization"})
        return handler(fields)


# --- the sections' parts -------------------------------------------------------------------


class Classification(Record):
    """How classify read the question."""

    reason: str | None = None
    rewrite: str | None = None
    knowledge_base: bool | None = None


class Rewrite(Record):
    """Who rewrote a follow-up into a standalone question (`by`: rules or llm)."""

    by: str | None = None
    model: str | None = None


class AccessRecord(Record):
    """What the turn's user could see when it retrieved (ADR 0078): the collections searched
    and the session's scope (empty: none set); in a replay or an export, the sources
    withheld since (their numbers)."""

    collections: list[uuid.UUID] | None = None
    scope: list[uuid.UUID] | None = None
    withheld_sources: list[int | str] | None = None


class RetrievalQuery(Record):
    """One query retrieve ran (or the previous answer's cited chunks, `chunks`)."""

    name: str
    weight: float
    text: str | None = None
    chunks: list[str] | None = None


class RetrievalRecord(Record):
    """What retrieve searched with and what each query contributed."""

    queries: list[RetrievalQuery] = []
    contributions: dict[str, list[str]] = {}
    """Each passage's id, and the queries that brought it."""


class UnavailableAttachment(Record):
    """An attachment of the request that could not be used (not ready, failed)."""

    id: str
    status: str


class ManifestSource(Record):
    """A numbered source of the prompt, as recorded (with its tokens and a preview)."""

    n: int | None = None
    id: str
    kind: Literal["kb", "attachment", "faq"]
    source_id: str | None = None
    title: str | None = None
    score: float
    tokens: int | None = None
    snippet: str | None = None
    location: Location | None = None
    """Where the passage is in its document (issue 29); absent in older manifests."""


class Citations(Record):
    """The sources the answer cites (`[n]`), and how many invalid markers were removed."""

    cited: list[int] = []
    removed_invalid: int = 0


class SummaryRecord(Record):
    """Whether the session's running summary was in the prompt, and how many turns it covers."""

    included: bool | None = None
    summarized_turns: int | None = None


class Truncation(Record):
    """Something cut to fit the budget: a passage, the question, older history turns or a
    tool's result (`tool`, in `round`)."""

    kind: str
    reason: str
    id: str | None = None
    turns: int | None = None
    tokens_before: int | None = None
    tokens_after: int | None = None
    tool: str | None = None
    round: int | None = None


class Dropped(Record):
    """A passage left out of the prompt (a duplicate, or over the budget)."""

    id: str
    kind: str
    reason: str


class SourceDistribution(Record):
    """The prompt's tokens by origin."""

    kb: int = 0
    attachment: int = 0
    history: int = 0


class FaqMatch(Record):
    """The FAQ that answered the turn."""

    id: uuid.UUID
    question: str
    similarity: float


class TriageRecord(Record):
    """What the input guardrail and triage decided (`route`, whether the model was skipped)
    and why, step by step (`log`); the early answer itself is not part of it."""

    route: str
    skip_llm: bool
    log: list[str] = []
    faq: FaqMatch | None = None
    intent: str | None = None


class Grounding(Record):
    """How far the answer's sentences are backed by the sources they cite."""

    grounded: bool
    confidence: float
    issues: list[str] = []
    checked_sentences: int | None = None


class OutputGuardrail(Record):
    """The output guardrail's verdict on the answer."""

    safe: bool
    issues: list[str] = []
    replaced: bool | None = None


class Validation(Record):
    """The output checks of the answer."""

    sources: Grounding | None = None
    output_guardrail: OutputGuardrail | None = None


class OutputAudit(Record):
    """For the admin audit only: the answer as generated, when the guardrail altered it."""

    original_answer: str


class PromptCache(Record):
    """The provider's prompt cache: tokens read from it and written to it."""

    cached_prompt_tokens: int = 0
    cache_write_tokens: int = 0


class ToolCall(Record):
    """One tool call of the agent (its round, tool, arguments and outcome)."""

    round: int | None = None
    tool: str | None = None
    args: dict[str, str] | None = None
    """Each argument as text, cut to 200 characters."""
    result_ids: list[str] | None = None
    error: str | None = None


class ToolsRecord(Record):
    """The agent's tool calls, and the results cut to fit the budget."""

    calls: list[ToolCall] = []
    truncated: list[Truncation] = []
    rounds: int | None = None
    loop_guard: bool | None = None
    """Whether the loop guard stopped offering tools (the last call answered without)."""
    result_tokens: int | None = None
    """The tokens the tools' results added to the prompt."""


class TurnError(Record):
    """Why a turn did not complete (a stable code; the exception's type when one was raised)."""

    code: str
    type: str | None = None
