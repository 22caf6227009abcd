"""The output checks of an answer: grounding of each sentence, then the output guardrail.

One check for any answer: the validate_output node runs it on a complete answer, the chat
runtime on the partial answer of a turn that was stopped, cancelled, failed or orphaned (it is
stored and returned checked too). An altered original is kept for the audit only."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.config import Settings
from app.conversation.pipeline.budget import SYSTEM_PROMPT
from app.conversation.pipeline.tools import AGENT_INSTRUCTIONS
from app.conversation.turn.manifest_records import (
    Grounding,
    OutputAudit,
    OutputGuardrail,
    Validation,
)
from app.conversation.turn.types import SourceRef
from app.guardrails.grounding import check_grounding
from app.guardrails.output_checks import check_output
from app.pii.detect import anonymize


@dataclass(frozen=True)
class CheckedAnswer:
    """An answer after the output checks, with their record."""

    text: str
    validation: Validation
    audit: OutputAudit | None
    """The original answer when the guardrail altered it, else None."""


def check_answer(
    answer: str, query: str, sources: Sequence[SourceRef], settings: Settings
) -> CheckedAnswer:
    """Check `answer` against its sources and the output guardrail."""
    grounding = check_grounding(answer, list(sources), settings.grounding_min_overlap)
    verdict = check_output(
        answer,
        (SYSTEM_PROMPT, AGENT_INSTRUCTIONS),
        [query, *(f"{s['title']}\n{s['text']}" for s in sources)],
    )
    validation = Validation(
        sources=Grounding.model_validate(grounding),
        output_guardrail=OutputGuardrail(
            safe=verdict.safe, issues=verdict.issues, replaced=verdict.replaced
        ),
    )
    if verdict.text == answer:
        return CheckedAnswer(answer, validation, None)
    original = anonymize(answer).text if settings.pii_anonymize else answer
    return CheckedAnswer(verdict.text, validation, OutputAudit(original_answer=original))
