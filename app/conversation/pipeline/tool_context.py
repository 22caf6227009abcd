"""The tool-calling path's context accounting: tool results fitted into the token budget the
prompt left over, and the context manifest recomputed from what the tools gathered.

build_context runs before any tool (with the passages retrieve found), so its figures
describe only the first call's prompt; these functions bring them up to date with what the
tools added.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypedDict

from langchain_core.messages import AIMessage, BaseMessage

from app.conversation.pipeline.budget import AWAITING_SUMMARY, MIN_PASSAGE_TOKENS
from app.conversation.pipeline.context_quality import quality_score
from app.conversation.pipeline.state import Composition
from app.conversation.pipeline.tools import instruction_tokens
from app.conversation.turn.manifest import Manifest
from app.conversation.turn.manifest_records import SourceDistribution, ToolCall, Truncation
from app.conversation.turn.types import PassageData, SourceRef
from app.llm.tokens import count_tokens, truncate_to_tokens

OVER_BUDGET_RESULT = "The results did not fit in the context budget; answer from what you have."


def prompt_tokens(manifest: Manifest) -> int:
    """The tool-calling prompt: build_context's prompt plus the agent instructions."""
    return (manifest.token_count or 0) + instruction_tokens()


def result_allowance(manifest: Manifest) -> int:
    """What tool results may add to the prompt over the whole turn."""
    return max(0, (manifest.token_budget or 0) - prompt_tokens(manifest))


@dataclass
class FittedResult:
    """A tool result cut to fit the prompt, the sources it still numbers and its tokens."""

    text: str
    sources: list[SourceRef]
    tokens: int
    note: Truncation | None = field(default=None)


def fit_result(
    text: str, new_sources: Sequence[SourceRef], available: int, record: ToolCall
) -> FittedResult:
    """A tool result cut to `available` tokens (or replaced by a short notice when too little
    is left); new sources whose passage was cut away entirely are not numbered."""
    tokens = count_tokens(text)
    if tokens <= available:
        return FittedResult(text, list(new_sources), tokens)
    if available >= MIN_PASSAGE_TOKENS:
        cut = truncate_to_tokens(text, available)
    else:
        cut = OVER_BUDGET_RESULT
    kept: list[SourceRef] = []
    for source in new_sources:
        header = f"[{source['n']}] {source['title']}\n"
        at = cut.find(header)
        if at >= 0:  # numbered in what the model read: keep it, with the part it read
            shown = cut[at + len(header) :].split("\n\n[", 1)[0]
            kept.append(SourceRef(**{**source, "text": shown}))
    note = Truncation(
        kind="tool_result",
        tool=record.tool,
        tokens_before=tokens,
        tokens_after=count_tokens(cut) if cut != OVER_BUDGET_RESULT else 0,
        reason="over budget",
    )
    # The notice is the one thing past the allowance: a few tokens, so that every tool call
    # still gets its answer.
    return FittedResult(cut, kept, count_tokens(cut), note)


def first_search_query(exchange: Sequence[BaseMessage]) -> str | None:
    """The query the model wrote for its first knowledge-base search: this path's rewrite."""
    for message in exchange:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                if call["name"] == "search_knowledge_base" and call["args"].get("query"):
                    return str(call["args"]["query"])
    return None


class ToolTurnFigures(TypedDict):
    """The budget section's figures that depend on the sources, after the tools ran."""

    token_count: int
    source_distribution: SourceDistribution
    quality_score: float
    truncated: list[Truncation]
    truncation_applied: bool


def tool_turn_metadata(
    metadata: Manifest | Mapping[str, object],
    composition: Composition,
    sources: Sequence[SourceRef],
    retrieved: int,
) -> ToolTurnFigures:
    """The manifest's figures that depend on the sources, recomputed after the last round
    (from the manifest so far, typed or as stored)."""
    manifest = metadata if isinstance(metadata, Manifest) else Manifest.read(dict(metadata))
    tools_cut = manifest.tools.truncated if manifest.tools else []
    prompt_cut = manifest.truncated or []
    chosen = [
        (
            PassageData(
                id=s["id"],
                kind=s["kind"],
                source_id=s["source_id"],
                title=s["title"],
                text=s["text"],
                score=s["score"],
                location=s.get("location", {}),
            ),
            s["text"],
            count_tokens(s["text"]),
        )
        for s in sources
        if s["kind"] in ("kb", "attachment")
    ]
    distribution = (manifest.source_distribution or SourceDistribution()).model_copy(
        update={
            "kb": sum(t for p, _, t in chosen if p["kind"] == "kb"),
            "attachment": sum(t for p, _, t in chosen if p["kind"] == "attachment"),
        }
    )
    cut_results = bool(tools_cut)
    # As build_context scores it: anything its budget cut (question, passages, history).
    cut_prompt = any(t.kind != "tool_result" and t.reason != AWAITING_SUMMARY for t in prompt_cut)
    result_tokens = (manifest.tools.result_tokens if manifest.tools else None) or 0
    return ToolTurnFigures(
        token_count=prompt_tokens(manifest) + result_tokens,
        source_distribution=distribution,
        quality_score=quality_score(
            composition, chosen, max(retrieved, len(chosen)), cut_results or cut_prompt
        ),
        truncated=[*prompt_cut, *tools_cut],
        truncation_applied=bool(manifest.truncation_applied) or cut_results,
    )
