"""GET /kb/overview: what the knowledge base covers and three questions drawn from it, for a
new chat; only the caller's tenant, only ready documents, for members too."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession

from app.knowledge.overview import Topic, headings_of, suggestions, topic
from tests.factories import login, make_tenant, make_user

pytestmark = pytest.mark.committed

GUIDE = b"""# Espresso care

Descale the machine every month.

## Descaling

Use citric acid.

## Milk frothing

Purge the wand after each use.
"""


async def test_members_see_their_tenants_documents_headings_and_three_questions(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    admin = await login(client, await make_user(db, tenant, role="admin"))
    member = await login(client, await make_user(db, tenant))
    for name, data in (("espresso-care.md", GUIDE), ("returns.txt", b"Returns within 30 days.")):
        accepted = await client.post(
            "/kb/documents", files={"file": (name, data)}, headers=admin.headers
        )
        assert accepted.status_code == 202, accepted.text
    # Another tenant's document, with headings of its own: never shown here.
    other = await login(client, await make_user(db, await make_tenant(db), role="admin"))
    theirs = b"# Secret roadmap\n\n## Project Falcon\n\nLaunch in May.\n"
    await client.post(
        "/kb/documents", files={"file": ("roadmap.md", theirs)}, headers=other.headers
    )

    await app.state.resources.jobs.drain()  # the in-process ingestion jobs
    response = await client.get("/kb/overview", headers=member.headers)
    assert response.status_code == 200
    body = response.json()
    assert body["documents"] == 2
    assert body["topics"] == [
        {"title": "Returns", "headings": []},
        {"title": "Espresso care", "headings": ["Descaling", "Milk frothing"]},
    ]
    assert body["suggestions"] == [
        "What is “Returns” about?",
        "What does “Espresso care” say about descaling?",
        "What does “Espresso care” say about milk frothing?",
    ]
    assert "Falcon" not in response.text and "roadmap" not in response.text

    theirs_seen = (await client.get("/kb/overview", headers=other.headers)).json()
    assert [t["title"] for t in theirs_seen["topics"]] == ["Secret roadmap"]
    assert (await client.get("/kb/overview")).status_code == 401


def test_headings_make_topics_and_questions() -> None:
    texts = ["# Admin guide\nintro\n## API keys\n## Users ##\n", "## Users\n### Retention"]
    assert headings_of(texts) == ["Admin guide", "API keys", "Users", "Retention"]
    guide = topic("admin-guide.md", headings_of(texts))
    assert guide == Topic("Admin guide", ["API keys", "Users", "Retention"])
    assert topic("Handbook", ["Handbook", "Leave"]) == Topic("Handbook", ["Leave"])
    assert suggestions([guide]) == [
        "What does “Admin guide” say about API keys?",
        "What does “Admin guide” say about users?",
        "What does “Admin guide” say about retention?",
    ]
    assert topic("refund_policy-2026.txt", []) == Topic("Refund policy 2026")
    assert suggestions([]) == []
