"""GET /kb/documents/{id}/chunks and /history: an admin reads a document's chunks in
reading order, page by page, and its status history (newest first); another tenant's
document is 404, members are refused."""

from __future__ import annotations

import uuid

import httpx
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession

from tests.factories import login, make_tenant, make_user

SECTIONS = "\n\n".join(
    f"## Section {i}\n\n"
    + " ".join(f"Sentence {i}.{j} about refunds and plans." for j in range(40))
    for i in range(8)
)


async def test_an_admin_pages_through_a_documents_chunks_and_reads_its_history(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    admin = await login(client, await make_user(db, tenant, role="admin"))
    added = await client.post(
        "/kb/documents", json={"title": "Handbook", "text": SECTIONS}, headers=admin.headers
    )
    assert added.status_code == 202, added.text
    await app.state.resources.jobs.drain()
    doc_id = added.json()["id"]
    document = (await client.get(f"/kb/documents/{doc_id}", headers=admin.headers)).json()
    assert document["status"] == "ready" and document["chunk_count"] >= 3, document

    seen: list[int] = []
    texts: list[str] = []
    cursor: str | None = None
    for _ in range(50):
        params: dict[str, str | int] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = await client.get(
            f"/kb/documents/{doc_id}/chunks", params=params, headers=admin.headers
        )
        assert page.status_code == 200, page.text
        body = page.json()
        assert len(body["items"]) <= 2
        seen += [c["ordinal"] for c in body["items"]]
        texts += [c["text"] for c in body["items"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert seen == list(range(document["chunk_count"]))
    joined = "\n".join(texts)  # the whole text, in order
    assert joined.index("Sentence 0.0") < joined.index("Sentence 3.0") < joined.index("7.39")

    history = await client.get(f"/kb/documents/{doc_id}/history", headers=admin.headers)
    assert history.status_code == 200
    events = history.json()
    steps = [(e["status"], e["detail"]) for e in events]
    # Newest first: the statuses it entered, as its ingestion wrote them.
    assert steps == [
        ("ready", f"{document['chunk_count']} chunks"),
        ("processing", "attempt 1"),
        ("pending", "added"),
    ]
    times = [e["at"] for e in events]
    assert times == sorted(times, reverse=True)

    bad = await client.get(
        f"/kb/documents/{doc_id}/chunks", params={"cursor": "x1"}, headers=admin.headers
    )
    assert bad.status_code == 400
    assert bad.json()["error"]["code"] == "invalid_cursor"


async def test_another_tenants_document_is_404_and_members_are_refused(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    admin = await login(client, await make_user(db, tenant, role="admin"))
    member = await login(client, await make_user(db, tenant))
    stranger = await login(client, await make_user(db, await make_tenant(db), role="admin"))
    added = await client.post(
        "/kb/documents", json={"title": "Private", "text": "Only ours."}, headers=admin.headers
    )
    await app.state.resources.jobs.drain()
    doc_id = added.json()["id"]
    for path in ("chunks", "history"):
        foreign = await client.get(f"/kb/documents/{doc_id}/{path}", headers=stranger.headers)
        assert foreign.status_code == 404, path
        assert foreign.json()["error"]["code"] == "document_not_found"
        unknown = await client.get(f"/kb/documents/{uuid.uuid4()}/{path}", headers=admin.headers)
        assert unknown.status_code == 404
        refused = await client.get(f"/kb/documents/{doc_id}/{path}", headers=member.headers)
        assert refused.status_code == 403
