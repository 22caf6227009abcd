"""validate_output: grounding of each answer sentence, then the output guardrail
(app/conversation/pipeline/answer_check.py). The stored and returned answer is the validated one;
an altered
original is kept for the audit only (the manifest's `audit`, which the runner leaves out of
what the client sees)."""

from __future__ import annotations

from langgraph.runtime import Runtime

from app.conversation.pipeline.answer_check import check_answer
from app.conversation.pipeline.context import TurnContext
from app.conversation.pipeline.state import TurnState, TurnUpdate, public_triage
from app.conversation.turn.manifest import Manifest


async def validate_output(state: TurnState, runtime: Runtime[TurnContext]) -> TurnUpdate:
    """Check the generated answer; keep the checked one."""
    checked = check_answer(
        state["answer"], state["query"], state["sources"], runtime.context.settings
    )
    manifest = Manifest(triage=public_triage(state["triage"]), validation=checked.validation)
    if checked.audit is not None:
        manifest.audit = checked.audit
    return TurnUpdate(answer=checked.text, context_metadata=manifest)
