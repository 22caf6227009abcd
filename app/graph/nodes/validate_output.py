"""validate_output: grounding of each answer sentence, then the output guardrail. The stored
and returned answer is the validated one; an altered original is kept for the audit only
(context_metadata["audit"], which the runner leaves out of what the client sees)."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from app.graph.budget import SYSTEM_PROMPT
from app.graph.context import TurnContext
from app.graph.nodes.answer_early import public_triage
from app.graph.state import TurnState
from app.guardrails.grounding import check_grounding
from app.guardrails.output_checks import check_output
from app.llm.tools import AGENT_INSTRUCTIONS
from app.privacy.pii import anonymize


async def validate_output(state: TurnState, runtime: Runtime[TurnContext]) -> dict[str, Any]:
    settings = runtime.context.settings
    answer = state["answer"]
    sources = state["sources"]
    grounding = check_grounding(answer, sources, settings.grounding_min_overlap)
    verdict = check_output(
        answer,
        (SYSTEM_PROMPT, AGENT_INSTRUCTIONS),
        [state["query"], *(f"{s['title']}\n{s['text']}" for s in sources)],
    )
    validation = {
        "sources": grounding,
        "output_guardrail": {
            "safe": verdict.safe,
            "issues": verdict.issues,
            "replaced": verdict.replaced,
        },
    }
    metadata = {
        **state["context_metadata"],
        "triage": public_triage(state["triage"]),
        "validation": validation,
    }
    if verdict.text != answer:
        original = anonymize(answer).text if settings.pii_anonymize else answer
        metadata["audit"] = {"original_answer": original}
    return {"answer": verdict.text, "validation": validation, "context_metadata": metadata}
