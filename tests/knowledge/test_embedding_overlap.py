"""A search does not wait for its query's embedding to start: the search is prepared and the
lexical leg runs while the vector is computed; only the dense leg waits for it
(app/retrieval/hybrid.py `query_legs`). A turn's history query is still being embedded when
retrieval starts, so this is time off the first token."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession

from app.embeddings.base import Embedder
from app.retrieval.base import Hit
from app.retrieval.hybrid import HybridRetriever
from app.retrieval.multi_query import WeightedQuery
from app.retrieval.repository import SearchRepository
from tests.factories import make_knowledge_base

pytestmark = pytest.mark.committed

DOCUMENTS = [
    ("Refunds", "A laptop bought in the shop is refunded within thirty days."),
    ("Holidays", "Staff take twenty-five days of leave each year."),
]


class HeldEmbedder:
    """The app's embedder, holding every call until `release` is set; records what ran
    while it was held."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dimension = inner.dimension
        self.max_input_tokens = inner.max_input_tokens
        self.release = asyncio.Event()
        self.waiting = 0

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.waiting += 1
        await self.release.wait()
        return await self.inner.embed(texts)


class Setup(NamedTuple):
    """A knowledge base, a retriever whose embedder is held, and the lexical searches seen."""

    tenant_id: uuid.UUID
    held: HeldEmbedder
    retriever: HybridRetriever
    searched: list[str]


async def _setup(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, monkeypatch: pytest.MonkeyPatch
) -> Setup:
    tenant_id = await make_knowledge_base(app, client, db, DOCUMENTS)
    configured: HybridRetriever = app.state.resources.retriever
    held = HeldEmbedder(configured.embedder)
    searched: list[str] = []
    bm25 = SearchRepository.bm25

    async def bm25_seen(self: SearchRepository, query: str, **kwargs: Any) -> list[Hit]:
        hits = await bm25(self, query, **kwargs)
        searched.append(query)
        return hits

    monkeypatch.setattr(SearchRepository, "bm25", bm25_seen)
    return Setup(tenant_id, held, HybridRetriever(held, configured.settings), searched)


async def _until(condition: Callable[[], bool]) -> None:
    for _ in range(100):  # bounded: 10 s
        if condition():
            return
        await asyncio.sleep(0.1)
    raise AssertionError("not reached in 10 s")


async def test_the_lexical_leg_runs_while_the_query_is_embedded(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    tenant_id, held, retriever, searched = await _setup(app, client, db, monkeypatch)
    search = asyncio.ensure_future(retriever.query_legs(db, tenant_id, ["laptop refunded"]))
    await _until(lambda: bool(searched))
    assert searched == ["laptop refunded"]  # while the embedding is still held
    assert held.waiting == 1 and not search.done()  # the dense leg waits for the vector
    held.release.set()
    (by_leg,) = await asyncio.wait_for(search, 10)
    assert list(by_leg) == ["dense", "lexical"]
    assert by_leg["dense"] and by_leg["lexical"][0].passage.title == "Refunds"


async def test_several_queries_share_one_embedding_and_search_meanwhile(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    tenant_id, held, retriever, searched = await _setup(app, client, db, monkeypatch)
    context = app.state.resources.turn_context
    queries = [
        WeightedQuery("question", "is it refunded", 1.0),
        WeightedQuery("history", "laptop is it refunded", 0.5),
    ]
    search = asyncio.ensure_future(
        retriever.search_queries(
            lambda: context.transaction(tenant_id), tenant_id, queries, attachment_ids=[], k=2
        )
    )
    await _until(lambda: len(searched) == 2)
    assert sorted(searched) == sorted(q.text for q in queries)  # both, while held
    assert held.waiting == 1 and not search.done()  # one batch for both queries, still held
    held.release.set()
    result = await asyncio.wait_for(search, 10)
    assert result.hits[0].passage.title == "Refunds"
    assert set(result.contributions[result.hits[0].passage.id]) == {"question", "history"}
