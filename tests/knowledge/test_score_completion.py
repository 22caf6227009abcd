"""Score completion (z-score fusion): each leg also scores the candidates only the other leg
brought, so the fusion compares real scores instead of counting a missing document as the
leg's weakest candidate (app/retrieval/hybrid.py `_complete`)."""

from __future__ import annotations

import uuid
from dataclasses import replace

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.db import scope_to_tenant
from app.embeddings.base import query_input
from app.retrieval.base import Hit
from app.retrieval.hybrid import HybridRetriever
from app.retrieval.repository import KB, SearchRepository
from tests.factories import login, make_knowledge_base, make_tenant, make_user

pytestmark = pytest.mark.committed

QUERY = "is the laptop refunded"
DOCUMENTS = [
    ("Zephyrine allowance", "Night shifts are paid a quarter more."),
    ("Allowance for travel", "Travel by train is refunded in second class."),
    ("Expenses", "Receipts are filed within a month of the purchase."),
    ("Holidays", "Staff take twenty-five days of leave each year."),
    ("Laptops", "Each new starter receives a laptop on the first day."),
    ("Canteen", "Lunch is served from noon until two in the afternoon."),
]


def _documents(hits: list[Hit]) -> set[str]:
    return {hit.document_key for hit in hits}


async def test_each_leg_scores_the_other_legs_candidates(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant_id = await make_knowledge_base(app, client, db, DOCUMENTS)
    configured: HybridRetriever = app.state.resources.retriever
    narrow = replace(configured.settings, candidates=2, method="zscore")
    plain = HybridRetriever(configured.embedder, replace(narrow, complete_scores=False))
    completed = HybridRetriever(configured.embedder, replace(narrow, complete_scores=True))

    (before,) = await plain.query_legs(db, tenant_id, [QUERY])
    (after,) = await completed.query_legs(db, tenant_id, [QUERY])

    # Two candidates a leg: the legs bring different documents (else nothing to complete).
    assert _documents(before["dense"]) != _documents(before["lexical"])
    union = _documents(before["dense"]) | _documents(before["lexical"])
    assert _documents(after["dense"]) == union
    assert _documents(after["lexical"]) == union

    # The completed scores are each leg's own scores of those documents, searched in full.
    repository = SearchRepository(db, tenant_id)
    [vector] = await configured.embedder.embed([query_input(QUERY)])
    everything = await repository.nearest(KB, vector, limit=100, exact=True, attachment_ids=())
    nearest: dict[str, float] = {}
    for hit in everything:
        nearest.setdefault(hit.document_key, hit.passage.score)
    for hit in after["dense"]:
        assert hit.passage.score == pytest.approx(nearest[hit.document_key], abs=1e-6)
    bm25: dict[str, float] = {}
    for hit in await repository.bm25(QUERY, limit=100, title_weight=narrow.title_weight):
        bm25.setdefault(hit.document_key, hit.passage.score)
    for hit in after["lexical"]:
        # A candidate with none of the question's words scores 0, it is not left out.
        assert hit.passage.score == pytest.approx(bm25.get(hit.document_key, 0.0), abs=1e-9)
    assert any(hit.document_key not in bm25 for hit in after["lexical"])
    assert [h.passage.score for h in after["lexical"]] == sorted(
        (h.passage.score for h in after["lexical"]), reverse=True
    )


async def test_bm25_and_similarities_keep_to_the_documents_asked_for(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant_id = await make_knowledge_base(app, client, db, DOCUMENTS)
    repository = SearchRepository(db, tenant_id)
    every = await repository.bm25(QUERY, limit=None, title_weight=2.0)
    assert len(_documents(every)) == 2  # the laptops, the travel refunded
    wanted = uuid.UUID(every[-1].passage.source_id)
    only = await repository.bm25(QUERY, limit=None, title_weight=2.0, document_ids=[wanted])
    assert [hit.passage.source_id for hit in only] == [str(wanted)]
    assert only[0].passage.score == pytest.approx(every[-1].passage.score)

    [vector] = await app.state.resources.retriever.embedder.embed([query_input(QUERY)])
    near = await repository.similarities(KB, vector, [wanted])
    assert [hit.passage.source_id for hit in near] == [str(wanted)]
    exact = await repository.nearest(KB, vector, limit=100, exact=True, attachment_ids=())
    best = next(hit for hit in exact if hit.passage.source_id == str(wanted))
    assert near[0].passage.score == pytest.approx(best.passage.score, abs=1e-6)


async def test_attachments_are_completed_too(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    admin = await login(client, await make_user(db, tenant, role="admin"))
    attachments = []
    for title, text in DOCUMENTS:
        response = await client.post(
            "/attachments",
            files={"file": (f"{title.lower().replace(' ', '-')}.txt", text.encode())},
            headers=admin.headers,
        )
        assert response.status_code == 201, response.text
        attachments.append(uuid.UUID(response.json()["id"]))
    await app.state.resources.jobs.drain()
    await scope_to_tenant(db, tenant.id)
    configured: HybridRetriever = app.state.resources.retriever
    narrow = replace(configured.settings, candidates=2, method="zscore")
    plain = HybridRetriever(configured.embedder, replace(narrow, complete_scores=False))
    completed = HybridRetriever(configured.embedder, replace(narrow, complete_scores=True))

    (before,) = await plain.query_legs(
        db, tenant.id, [QUERY], attachment_ids=attachments, knowledge_base=False
    )
    (after,) = await completed.query_legs(
        db, tenant.id, [QUERY], attachment_ids=attachments, knowledge_base=False
    )
    assert _documents(before["dense"]) != _documents(before["lexical"])
    union = _documents(before["dense"]) | _documents(before["lexical"])
    assert _documents(after["dense"]) == union
    assert _documents(after["lexical"]) == union
    assert all(hit.passage.kind == "attachment" for hit in after["lexical"])
