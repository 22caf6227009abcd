"""A tenant's language (ADR 0076): its chunks and its questions are analysed with the same
text-search configuration, a document may carry its own, and switching the language
re-analyses the tenant's chunks in the background, with progress, while chats go on."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.core.db import scope_to_tenant
from app.retrieval.repository import SearchRepository
from tests.chat_helpers import ask, owner_connection
from tests.factories import LoggedIn, login, make_session, make_tenant, make_user

pytestmark = pytest.mark.committed

BIKE_LANES = "De gemeente legt dit jaar nieuwe fietspaden aan langs de rivier en het park."
# Dutch documents, each its own chunk: a rebuild of several batches.
DUTCH = [
    (f"Wijk {n}", f"In wijk {n} worden de fietspaden verbreed en de straten vernieuwd.")
    for n in range(1, 9)
]


@pytest.fixture
async def settings(test_database: Settings) -> Settings:
    """Two chunks a transaction: a rebuild of a few documents takes several."""
    return test_database.model_copy(
        update={"redis_prefix": f"tl-test-{uuid.uuid4().hex[:8]}:", "language_rebuild_batch": 2}
    )


async def _admin(client: httpx.AsyncClient, db: AsyncSession) -> tuple[uuid.UUID, LoggedIn]:
    tenant = await make_tenant(db)
    return tenant.id, await login(client, await make_user(db, tenant, role="admin"))


async def _add(
    client: httpx.AsyncClient, admin: LoggedIn, title: str, body: str, **extra: Any
) -> str:
    response = await client.post(
        "/kb/documents", json={"title": title, "text": body, **extra}, headers=admin.headers
    )
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


async def _lexical_titles(db: AsyncSession, tenant_id: uuid.UUID, query: str) -> list[str]:
    """The titles the lexical leg (BM25 from the inverted index) finds for `query`."""
    await scope_to_tenant(db, tenant_id)
    hits = await SearchRepository(db, tenant_id).bm25(query, limit=10)
    await db.commit()
    return [hit.passage.title for hit in hits]


async def _set_language(client: httpx.AsyncClient, admin: LoggedIn, language: str) -> Any:
    response = await client.put(
        "/admin/settings", json={"language": language}, headers=admin.headers
    )
    assert response.status_code == 200, response.text
    return response.json()


async def test_a_dutch_tenant_stems_dutch_and_an_english_one_does_not(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    dutch_id, dutch = await _admin(client, db)
    english_id, english = await _admin(client, db)
    chosen = await _set_language(client, dutch, "Dutch")
    assert chosen["language"] == "dutch"
    assert {"english", "dutch", "german", "italian", "simple"} <= set(chosen["languages"])
    for admin in (dutch, english):
        await _add(client, admin, "Verkeer", BIKE_LANES)
    await app.state.resources.jobs.drain()

    assert await _lexical_titles(db, dutch_id, "fietspad") == ["Verkeer"]
    assert await _lexical_titles(db, english_id, "fietspad") == []  # not stemmed as Dutch
    assert await _lexical_titles(db, english_id, "fietspaden") == ["Verkeer"]  # the word itself
    described = (await client.get("/admin/settings", headers=english.headers)).json()
    assert described["language"] == "english"
    assert described["lexical_index"] == {
        "language": "english",
        "status": "ready",
        "chunks": 1,
        "analysed": 1,
        "progress": 1.0,
    }


async def test_a_document_may_carry_its_own_language(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant_id, admin = await _admin(client, db)  # an English tenant
    document = await _add(client, admin, "Verkeer", BIKE_LANES, language="dutch")
    await _add(client, admin, "Parking", "Cars park in the garage under the town hall.")
    await app.state.resources.jobs.drain()

    assert await _lexical_titles(db, tenant_id, "fietspad") == ["Verkeer"]
    assert await _lexical_titles(db, tenant_id, "garages for cars") == ["Parking"]  # English too
    shown = await client.get(f"/kb/documents/{document}", headers=admin.headers)
    assert shown.json()["language"] == "dutch"

    refused = await client.post(
        "/kb/documents",
        json={"title": "X", "text": "Some text.", "language": "klingon"},
        headers=admin.headers,
    )
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "unknown_language"
    assert "dutch" in refused.json()["error"]["message"]
    unknown = await client.put(
        "/admin/settings", json={"language": "klingon"}, headers=admin.headers
    )
    assert unknown.status_code == 422
    assert unknown.json()["error"]["code"] == "unknown_language"
    member = await login(client, await make_user(db, await _tenant_of(db, tenant_id)))
    forbidden = await client.put(
        "/admin/settings", json={"language": "dutch"}, headers=member.headers
    )
    assert forbidden.status_code == 403


async def _tenant_of(db: AsyncSession, tenant_id: uuid.UUID) -> Any:
    from app.models import Tenant

    await scope_to_tenant(db, tenant_id)
    tenant = await db.get(Tenant, tenant_id)
    await db.commit()
    return tenant


LEXICON_MATCHES_VECTORS = text(
    """
    SELECT
      (SELECT coalesce(array_agg(row(lexeme, df)::text ORDER BY lexeme), '{}')
       FROM kb_term_stats WHERE tenant_id = :t)
      = (SELECT coalesce(array_agg(row(lexeme, n)::text ORDER BY lexeme), '{}') FROM (
           SELECT l.lexeme, count(*) AS n
           FROM kb_chunks c, unnest(tsvector_to_array(c.tsv)) AS l(lexeme)
           WHERE c.tenant_id = :t GROUP BY 1) AS counted) AS stats,
      (SELECT count(*) FROM kb_term_postings WHERE tenant_id = :t)
      = (SELECT count(*) FROM kb_chunks c, unnest(c.tsv) AS u WHERE c.tenant_id = :t) AS postings,
      (SELECT total_length FROM kb_corpus_stats WHERE tenant_id = :t)
      = (SELECT sum(length(tsv)) FROM kb_chunks WHERE tenant_id = :t) AS length
    """
)


async def test_switching_language_rebuilds_in_the_background_while_a_chat_answers(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, settings: Settings
) -> None:
    tenant_id, admin = await _admin(client, db)
    for title, body in DUTCH:
        await _add(client, admin, title, body)
    await app.state.resources.jobs.drain()
    assert await _lexical_titles(db, tenant_id, "fietspad") == []  # analysed as English
    user = await make_user(db, await _tenant_of(db, tenant_id))
    chatter = await login(client, user)
    chat = await make_session(db, user)

    async with owner_connection(settings) as holder:
        # Another transaction holds the last chunk (in the rebuild's order): the rebuild
        # re-analyses three batches of two, then waits for it, mid-way.
        await holder.begin()
        await holder.execute(
            text(
                "SELECT id FROM kb_chunks WHERE tenant_id = :t ORDER BY id DESC LIMIT 1 FOR UPDATE"
            ),
            {"t": tenant_id},
        )
        switched = await _set_language(client, admin, "dutch")
        # Answered before any chunk is re-analysed: what is left to do.
        assert switched["language"] == "dutch"
        assert switched["lexical_index"] == {
            "language": "dutch",
            "status": "rebuilding",
            "chunks": len(DUTCH),
            "analysed": 0,
            "progress": 0.0,
        }
        index = switched["lexical_index"]
        for _ in range(600):  # bounded: 30 s
            index = (await client.get("/admin/settings", headers=admin.headers)).json()[
                "lexical_index"
            ]
            if index["analysed"] == len(DUTCH) - 2:
                break
            await asyncio.sleep(0.05)
        assert index == {
            "language": "dutch",
            "status": "rebuilding",
            "chunks": len(DUTCH),
            "analysed": len(DUTCH) - 2,
            "progress": 0.75,
        }
        # Mid-way, a chat answers, and a search finds the chunks in either language.
        answer = await ask(client, chatter, chat, "Welke fietspaden worden verbreed in wijk 3?")
        assert answer.status_code == 200, answer.text
        assert answer.json()["sources"]
        # "fietspad" matches the re-analysed chunks only; "fietspaden", analysed both ways,
        # those and the two still English ones.
        assert len(await _lexical_titles(db, tenant_id, "fietspad")) == len(DUTCH) - 2
        assert len(await _lexical_titles(db, tenant_id, "fietspaden")) == len(DUTCH)
        await holder.rollback()

    await app.state.resources.jobs.drain()
    done = (await client.get("/admin/settings", headers=admin.headers)).json()
    assert done["lexical_index"]["status"] == "ready"
    assert done["lexical_index"]["analysed"] == len(DUTCH)
    assert len(await _lexical_titles(db, tenant_id, "fietspad")) == len(DUTCH)
    await scope_to_tenant(db, tenant_id)
    consistent = (await db.execute(LEXICON_MATCHES_VECTORS, {"t": tenant_id})).one()
    await db.commit()
    assert tuple(consistent) == (True, True, True)  # statistics and postings followed

    # Back to English: the same path in reverse, and only English stems again.
    back = await _set_language(client, admin, "english")
    assert back["lexical_index"]["status"] == "rebuilding"
    await app.state.resources.jobs.drain()
    assert await _lexical_titles(db, tenant_id, "fietspad") == []
    final = (await client.get("/admin/settings", headers=admin.headers)).json()
    assert final["lexical_index"]["status"] == "ready"


async def test_an_extractive_answer_quotes_by_the_tenants_stems_from_the_next_turn_on(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    """Without a model, the answer is the page's sentence that shares the question's words
    by their stems, in the tenant's language, as soon as it is switched (ADR 0076)."""
    _, admin = await _admin(client, db)
    page = "Het nieuwe fietspad in wijk drie wordt volgend jaar verbreed."
    await _add(client, admin, "Wijk 3", page)
    await app.state.resources.jobs.drain()
    chat = await make_session(db, admin.user)
    question = "Wanneer komt de verbreding van de fietspaden?"

    english = await ask(client, admin, chat, question)
    assert english.status_code == 200, english.text
    assert [s["title"] for s in english.json()["sources"]] == ["Wijk 3"]  # found, yet
    assert page not in english.json()["answer"]  # no word of it is the question's, in English

    await _set_language(client, admin, "dutch")
    await app.state.resources.jobs.drain()
    dutch = await ask(client, admin, chat, question)
    assert dutch.status_code == 200, dutch.text
    assert page in dutch.json()["answer"]  # "verbreding" and "verbreed", "fietspaden" and "-pad"
