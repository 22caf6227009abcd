"""Titles are indexed (migration 0019): a document is found by a word that only its title
has, by full text and by embedding; an attachment likewise by its file name."""

from __future__ import annotations

import uuid

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.db import scope_to_tenant
from app.embeddings.base import attachment_title, document_input
from app.retrieval.base import Hit
from app.retrieval.hybrid import Leg
from tests.factories import LoggedIn, login, make_tenant, make_user

pytestmark = pytest.mark.committed

DISTRACTORS = [
    ("Expenses", "Receipts are filed within a month of the purchase."),
    ("Holidays", "Staff take twenty-five days of leave each year."),
    ("Laptops", "Each new starter receives a laptop on the first day."),
]


async def _search(
    app: FastAPI,
    db: AsyncSession,
    tenant_id: uuid.UUID,
    query: str,
    leg: Leg,
    attachments: list[uuid.UUID] | None = None,
) -> list[Hit]:
    await scope_to_tenant(db, tenant_id)
    retriever = app.state.resources.retriever
    return await retriever.search_hits(  # type: ignore[no-any-return]
        db,
        tenant_id,
        query,
        k=5,
        legs=(leg,),
        attachment_ids=attachments or (),
        knowledge_base=attachments is None,
    )


async def _admin(client: httpx.AsyncClient, db: AsyncSession) -> tuple[LoggedIn, uuid.UUID]:
    tenant = await make_tenant(db)
    return await login(client, await make_user(db, tenant, role="admin")), tenant.id


async def test_a_document_is_found_by_its_title_in_both_legs(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    admin, tenant_id = await _admin(client, db)
    documents = [("Zephyrine allowance", "Night shifts are paid a quarter more."), *DISTRACTORS]
    ids = []
    for title, text in documents:
        accepted = await client.post(
            "/kb/documents", json={"title": title, "text": text}, headers=admin.headers
        )
        assert accepted.status_code == 202, accepted.text
        ids.append(accepted.json()["id"])
    await app.state.resources.jobs.drain()

    lexical = await _search(app, db, tenant_id, "zephyrine", "lexical")
    assert [hit.passage.source_id for hit in lexical] == [ids[0]]  # only its title has it
    dense = await _search(app, db, tenant_id, "zephyrine allowance", "dense")
    assert dense[0].passage.source_id == ids[0]
    # The hashing embedder shares no feature between the query and the text alone: the
    # similarity comes from the title embedded with the chunk.
    assert dense[0].passage.score > 0.3
    assert all(hit.passage.score < 0.2 for hit in dense[1:])


async def test_an_attachment_is_found_by_its_file_name_in_both_legs(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    admin, tenant_id = await _admin(client, db)
    attachments = []
    for name, text in [("zephyrine-rota_2027", "Night shifts start at ten."), *DISTRACTORS]:
        response = await client.post(
            "/attachments", files={"file": (f"{name}.txt", text.encode())}, headers=admin.headers
        )
        assert response.status_code == 201, response.text
        attachments.append(uuid.UUID(response.json()["id"]))
    await app.state.resources.jobs.drain()

    lexical = await _search(app, db, tenant_id, "zephyrine rota", "lexical", attachments)
    assert [hit.passage.source_id for hit in lexical] == [str(attachments[0])]
    dense = await _search(app, db, tenant_id, "zephyrine rota", "dense", attachments)
    assert dense[0].passage.source_id == str(attachments[0])
    assert dense[0].passage.score > 0.3
    assert all(hit.passage.score < 0.2 for hit in dense[1:])


def test_the_title_is_the_first_line_of_what_is_embedded() -> None:
    assert document_input("Leave policy", "Twenty weeks.") == "Leave policy\n\nTwenty weeks."
    assert document_input("", "Twenty weeks.") == "Twenty weeks."
    assert attachment_title("q3_refund-policy.v2.pdf") == "q3 refund policy v2 pdf"
    assert attachment_title(None) == ""
