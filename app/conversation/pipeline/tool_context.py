"""The tool-calling path's context accounting: tool results fitted into the token budget the
prompt left over, and the context manifest recomputed from what the tools gathered.

build_context runs before any tool (with the passages retrieve found), so its figures
describe only the first call's prompt; these functions bring them up to date with what the
tools added.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from app.conversation.pipeline.budget import AWAITING_SUMMARY, MIN_PASSAGE_TOKENS
from app.conversation.pipeline.context_quality import quality_score
from app.conversation.pipeline.state import Composition
from app.conversation.pipeline.tools import instruction_tokens
from app.conversation.turn.types import PassageData, SourceRef
from app.llm.tokens import count_tokens, truncate_to_tokens

OVER_BUDGET_RESULT = "The results did not fit in the context budget; answer from what you have."


def prompt_tokens(metadata: dict[str, Any]) -> int:
    """The tool-calling prompt: build_context's prompt plus the agent instructions."""
    return int(metadata.get("token_count", 0)) + instruction_tokens()


def result_allowance(metadata: dict[str, Any]) -> int:
    """What tool results may add to the prompt over the whole turn."""
    return max(0, int(metadata.get("token_budget", 0)) - prompt_tokens(metadata))


@dataclass
class FittedResult:
    """A tool result cut to fit the prompt, the sources it still numbers and its tokens."""

    text: str
    sources: list[SourceRef]
    tokens: int
    note: dict[str, Any] | None = field(default=None)


def fit_result(
    text: str, new_sources: Sequence[SourceRef], available: int, record: dict[str, Any]
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
    note = {
        "kind": "tool_result",
        "tool": record.get("tool"),
        "tokens_before": tokens,
        "tokens_after": count_tokens(cut) if cut != OVER_BUDGET_RESULT else 0,
        "reason": "over budget",
    }
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


def tool_turn_metadata(
    metadata: dict[str, Any],
    composition: Composition,
    sources: Sequence[SourceRef],
    retrieved: int,
) -> dict[str, Any]:
    """The manifest's keys that depend on the sources, recomputed after the last round."""
    tools_meta = metadata.get("tools", {})
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
    truncated = [*metadata.get("truncated", []), *tools_meta.get("truncated", [])]
    distribution = dict(metadata.get("source_distribution", {}))
    distribution["kb"] = sum(t for p, _, t in chosen if p["kind"] == "kb")
    distribution["attachment"] = sum(t for p, _, t in chosen if p["kind"] == "attachment")
    cut_results = bool(tools_meta.get("truncated"))
    # As build_context scores it: anything its budget cut (question, passages, history).
    cut_prompt = any(
        t.get("kind") != "tool_result" and t.get("reason") != AWAITING_SUMMARY
        for t in metadata.get("truncated", [])
    )
    return {
        "token_count": prompt_tokens(metadata) + int(tools_meta.get("result_tokens", 0)),
        "source_distribution": distribution,
        "quality_score": quality_score(
            composition, chosen, max(retrieved, len(chosen)), cut_results or cut_prompt
        ),
        "truncated": truncated,
        "truncation_applied": bool(metadata.get("truncation_applied")) or cut_results,
    }
