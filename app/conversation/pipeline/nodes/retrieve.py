"""retrieve: tenant-scoped search of the knowledge base and the session's attachments, with
every query the turn planned (the raw question; with history, the history query, the model's
rewrite and the documents the previous answer cited) fused as one search (ADR 0034); the
composition is corrected by what was found."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from langgraph.runtime import Runtime
from sqlalchemy.ext.asyncio import AsyncSession

from app.conversation.pipeline.composition import CompositionGuess, refine_with_results
from app.conversation.pipeline.context import TurnContext
from app.conversation.pipeline.state import TurnState, TurnUpdate, manifest_of, turn_ids
from app.conversation.repository import TurnRepository
from app.conversation.turn.manifest import RetrievalSection
from app.conversation.turn.manifest_records import AccessRecord, RetrievalQuery, RetrievalRecord
from app.conversation.turn.types import HistoryTurn, PassageData
from app.core.db import restrict_to_collections, visible_collections
from app.retrieval.base import Passage
from app.retrieval.multi_query import CITED, WeightedQuery

_CITATION = re.compile(r"\[(\d+)(?:\s*,\s*\d+)*\]")
_NUMBER = re.compile(r"\d+")


def cited_chunks(answer: str, sources: Sequence[Any]) -> list[str]:
    """The chunk ids an answer cited (`[n]` is the n-th source of its prompt); all of its
    sources when it cited none."""
    ids = [s["id"] for s in sources if isinstance(s, dict) and isinstance(s.get("id"), str)]
    numbers = [int(n) for m in _CITATION.finditer(answer) for n in _NUMBER.findall(m.group(0))]
    cited = [ids[n - 1] for n in dict.fromkeys(numbers) if 0 < n <= len(ids)]
    return cited or ids


async def _previous_citations(
    db: AsyncSession, state: TurnState, history: Sequence[HistoryTurn]
) -> list[str]:
    """The chunks the previous stored turn's answer cited (a client-sent turn has none)."""
    if not history or history[-1]["status"] == "client":
        return []
    ids = turn_ids(state)
    sources = await TurnRepository(db, ids.tenant).prompt_sources(
        ids.session, uuid.UUID(history[-1]["turn_id"])
    )
    return cited_chunks(history[-1]["answer"], sources)


def _passage(p: Passage) -> PassageData:
    return PassageData(
        id=p.id,
        kind=p.kind,
        source_id=p.source_id,
        title=p.title,
        text=p.text,
        score=p.score,
        location=p.location,
    )


async def retrieve(state: TurnState, runtime: Runtime[TurnContext]) -> TurnUpdate:
    """Hybrid retrieval of the passages for the turn's planned queries."""
    ctx = runtime.context
    guess = CompositionGuess(
        state["query_composition"],
        state["composition_confidence"],
        _classification_reason(state),
    )
    plan = state["retrieval_plan"]
    queries = list(plan["queries"]) or [WeightedQuery("question", state["query"], 1.0)]
    queries = [q for q in queries if q.weight > 0]
    passages: list[PassageData] = []
    # What the user may see, within the session's scope: read with the turn's request,
    # never cached beyond it, held by RLS as well as by the search's filters (ADR 0078,
    # 0086), and in every turn's manifest, searched or not.
    visible, scope = state["collections"], state["collection_scope"]
    access = AccessRecord(collections=visible, scope=scope)
    manifest = RetrievalSection(access=access)
    if guess.composition != "chat" or state["is_follow_up"]:
        ids = turn_ids(state)
        tenant = ids.tenant
        attachments = state["active_attachment_ids"]
        k = ctx.settings.retrieval_k

        def narrowed() -> AbstractAsyncContextManager[AsyncSession]:
            return _narrowed(ctx.reads(tenant), visible)

        if len(queries) == 1:  # no conversation: exactly the single search of before
            async with narrowed() as db:
                found = await ctx.retriever.search(
                    db, tenant, queries[0].text, attachment_ids=attachments, k=k
                )
            passages = [_passage(p) for p in found]
            contributions = {p["id"]: [queries[0].name] for p in passages}
            cited: list[str] = []
            weight = 0.0
        else:
            weight = plan["cited_weight"]
            cited = []

            async def previous_citations(db: AsyncSession) -> list[str]:
                cited.extend(await _previous_citations(db, state, state["history"]))
                return cited

            result = await ctx.retriever.search_queries(
                narrowed,
                tenant,
                queries,
                attachment_ids=attachments,
                k=k,
                cited=previous_citations,
                cited_weight=weight,
            )
            passages = [_passage(h.passage) for h in result.hits]
            contributions = result.contributions
        searched = [RetrievalQuery(name=q.name, text=q.text, weight=q.weight) for q in queries]
        if cited:
            searched.append(RetrievalQuery(name=CITED, chunks=cited, weight=weight))
        record = RetrievalRecord(queries=searched, contributions=contributions)
        manifest = RetrievalSection(retrieval=record, access=access)
    refined = refine_with_results(guess, (p["kind"] for p in passages))
    return TurnUpdate(
        passages=passages,
        query_composition=refined.composition,
        composition_confidence=refined.confidence,
        context_metadata=manifest,
    )


@asynccontextmanager
async def _narrowed(
    reads: AbstractAsyncContextManager[AsyncSession], visible: list[uuid.UUID]
) -> AsyncIterator[AsyncSession]:
    """A read narrowed to the collections the user may see (the turn's read transaction is
    narrowed once, by its first search)."""
    async with reads as db:
        if visible_collections(db) != visible:
            await restrict_to_collections(db, visible)
        yield db


def _classification_reason(state: TurnState) -> str:
    """Why classify guessed the composition it did (retrieve refines that guess)."""
    classification = manifest_of(state).classification
    return (classification.reason if classification else None) or ""
