"""validate_output: grounding of each answer sentence, then the output guardrail. The stored
and returned answer is the validated one; an altered original is kept for the audit only
(context_metadata["audit"], which the runner leaves out of what the client sees).

`check_answer` is the same check for any answer, also the partial one of a turn that was
stopped, cancelled or failed (the runner stores and returns that one checked too)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.runtime import Runtime

from app.config import Settings
from app.graph.budget import SYSTEM_PROMPT
from app.graph.context import TurnContext
from app.graph.nodes.answer_early import public_triage
from app.graph.state import TurnState
from app.graph.tools import AGENT_INSTRUCTIONS
from app.guardrails.grounding import check_grounding
from app.guardrails.output_checks import check_output
from app.privacy.pii import anonymize
from app.turns.types import SourceRef


@dataclass(frozen=True)
class CheckedAnswer:
    text: str
    validation: dict[str, Any]
    audit: dict[str, Any] | None
    """{"original_answer": ...} when the guardrail altered the answer, else None."""


def check_answer(
    answer: str, query: str, sources: Sequence[SourceRef], settings: Settings
) -> CheckedAnswer:
    grounding = check_grounding(answer, list(sources), settings.grounding_min_overlap)
    verdict = check_output(
        answer,
        (SYSTEM_PROMPT, AGENT_INSTRUCTIONS),
        [query, *(f"{s['title']}\n{s['text']}" for s in sources)],
    )
    validation = {
        "sources": grounding,
        "output_guardrail": {
            "safe": verdict.safe,
            "issues": verdict.issues,
            "replaced": verdict.replaced,
        },
    }
    if verdict.text == answer:
        return CheckedAnswer(answer, validation, None)
    original = anonymize(answer).text if settings.pii_anonymize else answer
    return CheckedAnswer(verdict.text, validation, {"original_answer": original})


async def validate_output(state: TurnState, runtime: Runtime[TurnContext]) -> dict[str, Any]:
    checked = check_answer(
        state["answer"], state["query"], state["sources"], runtime.context.settings
    )
    metadata = {
        **state["context_metadata"],
        "triage": public_triage(state["triage"]),
        "validation": checked.validation,
    }
    if checked.audit is not None:
        metadata["audit"] = checked.audit
    return {"answer": checked.text, "validation": checked.validation, "context_metadata": metadata}
