"""How well-grounded a turn's context is (`context_metadata.quality_score`), from the passages
that went into the prompt: shared by build_context and the tool-calling path's recount."""

from __future__ import annotations

from collections.abc import Sequence

from app.conversation.pipeline.state import Composition
from app.conversation.turn.types import PassageData


def quality_score(
    composition: Composition,
    chosen: Sequence[tuple[PassageData, str, int]],
    retrieved: int,
    truncated: bool,
) -> float:
    """0-1: how well-grounded the context is.

    For retrieval turns: the best and mean relevance of the included passages (scores mapped
    to 0-1 by s/(s+0.1), suited to both full-text ranks and fused scores), minus a little for
    passages lost to the budget. A conversational turn with nothing retrieved scores 0.5:
    nothing to ground, nothing missing.
    """
    if not chosen:
        return 0.5 if composition == "chat" else 0.0
    relevance = [p["score"] / (p["score"] + 0.1) if p["score"] > 0 else 0.0 for p, _, _ in chosen]
    coverage = len(chosen) / max(1, retrieved)
    score = 0.5 * max(relevance) + 0.3 * (sum(relevance) / len(relevance)) + 0.2 * coverage
    if truncated:
        score -= 0.05
    return round(max(0.0, min(1.0, score)), 3)
