"""retrieve: tenant-scoped search of the knowledge base and the session's attachments; the
composition is corrected by what was found."""

from __future__ import annotations

import uuid
from typing import Any

from langgraph.runtime import Runtime

from app.graph.composition import CompositionGuess, refine_with_results
from app.graph.context import TurnContext
from app.graph.state import TurnState, turn_ids
from app.turns.types import PassageData


async def retrieve(state: TurnState, runtime: Runtime[TurnContext]) -> dict[str, Any]:
    """Hybrid retrieval of the passages for the (reformulated) query."""
    ctx = runtime.context
    guess = CompositionGuess(
        state["query_composition"],
        state["composition_confidence"],
        state["context_metadata"].get("classification", {}).get("reason", ""),
    )
    passages: list[PassageData] = []
    if guess.composition != "chat" or state["is_follow_up"]:
        tenant = turn_ids(state).tenant
        async with ctx.transaction(tenant) as db:
            found = await ctx.retriever.search(
                db,
                tenant,
                state["reformulated_query"] or state["query"],
                attachment_ids=[uuid.UUID(a) for a in state["active_attachment_ids"]],
                k=ctx.settings.retrieval_k,
            )
        passages = [
            PassageData(
                id=p.id,
                kind=p.kind,
                source_id=p.source_id,
                title=p.title,
                text=p.text,
                score=p.score,
            )
            for p in found
        ]
    refined = refine_with_results(guess, (p["kind"] for p in passages))
    return {
        "passages": passages,
        "query_composition": refined.composition,
        "composition_confidence": refined.confidence,
    }
