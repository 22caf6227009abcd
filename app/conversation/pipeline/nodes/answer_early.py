"""answer_early: the reply triage or the input guardrail decided on (blocked, off topic, FAQ,
small talk), streamed like a model's answer; no retrieval, no model. A FAQ answer cites its
entry as source [1]. persist then stores the turn as usual."""

from __future__ import annotations

import re

from langgraph.config import get_stream_writer
from langgraph.runtime import Runtime

from app.conversation.pipeline.budget import manifest_source
from app.conversation.pipeline.context import TurnContext
from app.conversation.pipeline.state import TurnState, TurnUpdate, public_triage
from app.conversation.turn.manifest import Manifest
from app.conversation.turn.manifest_records import (
    Citations,
    Grounding,
    OutputGuardrail,
    SourceDistribution,
    Validation,
)
from app.conversation.turn.types import SourceRef, Usage
from app.llm.tokens import count_tokens

TRIAGE_MODEL = "triage"


async def answer_early(state: TurnState, runtime: Runtime[TurnContext]) -> TurnUpdate:
    """Answer with what triage or the input guardrail decided, without the model."""
    triage = state["triage"]
    faq = triage.get("faq")
    answer = str(triage["answer"])
    sources: list[SourceRef] = []
    if triage["route"] == "faq" and faq:
        answer = f"{answer} [1]"
        sources = [
            SourceRef(
                n=1,
                id=faq["id"],
                kind="faq",
                source_id=faq["id"],
                title=f"FAQ: {faq['question']}",
                score=faq["similarity"],
                text=str(triage["answer"]),
            )
        ]
    write = get_stream_writer()
    for piece in re.findall(r"\s*\S+\s*", answer):
        write({"token": piece})
    validation = Validation(
        sources=Grounding(
            grounded=bool(sources),
            confidence=1.0 if sources else 0.0,
            issues=[] if sources else [f"not checked: answered by triage ({triage['route']})"],
        ),
        output_guardrail=OutputGuardrail(safe=True, issues=[], replaced=False),
    )
    tokens = count_tokens(answer)
    # Every section an early answer reaches, in one manifest (no other node adds to it).
    manifest = Manifest(
        query_composition="chat",
        composition_confidence=1.0,
        token_budget=0,
        token_count=0,
        truncation_applied=False,
        source_distribution=SourceDistribution(kb=0, attachment=0, history=0),
        quality_score=1.0 if sources else 0.0,
        sources=[manifest_source(s, tokens) for s in sources],
        history_turns_included=0,
        reformulated_query=None,
        active_attachment_ids=state["active_attachment_ids"],
        citations=Citations(cited=[1] if sources else [], removed_invalid=0),
        model=TRIAGE_MODEL,
        triage=public_triage(triage),
        validation=validation,
    )
    return TurnUpdate(
        answer=answer,
        sources=sources,
        model=TRIAGE_MODEL,
        query_composition="chat",
        composition_confidence=1.0,
        usage=Usage(prompt_tokens=0, completion_tokens=0, total_tokens=0),  # no model ran
        context_metadata=manifest,
    )
