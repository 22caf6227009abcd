"""An upload names its collection (ADR 0087): a document sent as JSON or as a file goes
straight into it, searchable by that collection's group alone; a collection the caller may
not see (another tenant's, one being deleted, an unknown id) is 404 `collection_not_found`
with nothing stored; omitted, the document lands in the default collection as before."""

from __future__ import annotations

import uuid

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.db import scope_to_tenant
from app.models import KbChunk, KbDocument
from tests.collections.world import World, make_world

pytestmark = pytest.mark.committed

MINUTES = "The quince acquisition was approved by the board on its spring retreat."
QUERY = "When was the quince acquisition approved?"


async def _hits(client: httpx.AsyncClient, world: World, role: str, doc_id: str) -> int:
    found = await client.post(
        "/kb/search", json={"query": QUERY, "k": 10}, headers=world.callers[role].headers
    )
    assert found.status_code == 200, found.text
    return sum(1 for item in found.json()["items"] if item["document_id"] == doc_id)


async def _stored(db: AsyncSession, world: World) -> tuple[int, int]:
    """The tenant's documents and chunks, counted without any collection narrowing."""
    await scope_to_tenant(db, world.tenant.id)
    documents = await db.scalar(
        select(func.count()).select_from(KbDocument).where(KbDocument.tenant_id == world.tenant.id)
    )
    chunks = await db.scalar(
        select(func.count()).select_from(KbChunk).where(KbChunk.tenant_id == world.tenant.id)
    )
    await db.commit()
    return int(documents or 0), int(chunks or 0)


async def _check_only_the_group_finds(
    app: FastAPI, client: httpx.AsyncClient, world: World, accepted: httpx.Response
) -> None:
    assert accepted.status_code == 202, accepted.text
    body = accepted.json()
    assert body["collection_id"] == world.board_id
    await app.state.resources.jobs.drain()  # the in-process ingestion job
    admin = world.callers["admin"]
    document = await client.get(f"/kb/documents/{body['id']}", headers=admin.headers)
    assert document.json()["status"] == "ready", document.text
    assert document.json()["collection_id"] == world.board_id
    assert await _hits(client, world, "member", body["id"]) >= 1
    assert await _hits(client, world, "admin", body["id"]) >= 1
    assert await _hits(client, world, "non_member", body["id"]) == 0
    assert await _hits(client, world, "other_tenant", body["id"]) == 0


async def test_a_text_sent_as_json_goes_into_the_named_collection(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    world = await make_world(client, db)
    accepted = await client.post(
        "/kb/documents",
        json={"title": "Retreat minutes", "text": MINUTES, "collection_id": world.board_id},
        headers=world.callers["admin"].headers,
    )
    await _check_only_the_group_finds(app, client, world, accepted)


async def test_a_file_upload_goes_into_the_named_collection(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    world = await make_world(client, db)
    accepted = await client.post(
        "/kb/documents",
        files={"file": ("retreat.txt", MINUTES.encode())},
        data={"collection_id": world.board_id},
        headers=world.callers["admin"].headers,
    )
    await _check_only_the_group_finds(app, client, world, accepted)


async def test_without_a_collection_the_document_goes_into_the_default_one(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    world = await make_world(client, db)
    admin = world.callers["admin"]
    accepted = await client.post(
        "/kb/documents", files={"file": ("retreat.txt", MINUTES.encode())}, headers=admin.headers
    )
    assert accepted.status_code == 202, accepted.text
    collections = await client.get("/admin/collections", headers=admin.headers)
    (general,) = [c for c in collections.json()["items"] if c["is_default"]]
    assert accepted.json()["collection_id"] == general["id"]
    await app.state.resources.jobs.drain()
    assert await _hits(client, world, "non_member", accepted.json()["id"]) >= 1


async def _foreign_collection(client: httpx.AsyncClient, world: World) -> str:
    theirs = await client.post(
        "/admin/collections",
        json={"name": "Their board", "visibility": "tenant"},
        headers=world.callers["other_tenant"].headers,
    )
    assert theirs.status_code == 201, theirs.text
    return str(theirs.json()["id"])


async def _deleting_collection(client: httpx.AsyncClient, world: World) -> str:
    admin = world.callers["admin"]
    doomed = await client.post(
        "/admin/collections", json={"name": "Doomed", "visibility": "tenant"}, headers=admin.headers
    )
    assert doomed.status_code == 201, doomed.text
    deleted = await client.delete(
        f"/admin/collections/{doomed.json()['id']}", headers=admin.headers
    )
    assert deleted.status_code in (200, 202), deleted.text
    return str(doomed.json()["id"])


@pytest.mark.parametrize("which", ["other_tenant", "deleting", "unknown"])
@pytest.mark.parametrize("sent_as", ["json", "file"])
async def test_a_collection_the_caller_may_not_see_is_404_and_nothing_is_stored(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, which: str, sent_as: str
) -> None:
    world = await make_world(client, db)
    admin = world.callers["admin"]
    if which == "other_tenant":
        collection = await _foreign_collection(client, world)
    elif which == "deleting":
        collection = await _deleting_collection(client, world)
    else:
        collection = str(uuid.uuid4())
    await app.state.resources.jobs.drain()
    before = await _stored(db, world)
    if sent_as == "json":
        refused = await client.post(
            "/kb/documents",
            json={"title": "Retreat minutes", "text": MINUTES, "collection_id": collection},
            headers=admin.headers,
        )
    else:
        refused = await client.post(
            "/kb/documents",
            files={"file": ("retreat.txt", MINUTES.encode())},
            data={"collection_id": collection},
            headers=admin.headers,
        )
    assert refused.status_code == 404, refused.text
    assert refused.json()["error"]["code"] == "collection_not_found"
    await app.state.resources.jobs.drain()
    assert await _stored(db, world) == before


async def test_a_collection_id_that_is_not_an_id_is_422(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    world = await make_world(client, db)
    admin = world.callers["admin"]
    as_file = await client.post(
        "/kb/documents",
        files={"file": ("retreat.txt", MINUTES.encode())},
        data={"collection_id": "board"},
        headers=admin.headers,
    )
    as_json = await client.post(
        "/kb/documents",
        json={"title": "Retreat minutes", "text": MINUTES, "collection_id": "board"},
        headers=admin.headers,
    )
    assert as_file.status_code == 422, as_file.text
    assert as_json.status_code == 422, as_json.text


async def test_the_upload_field_is_documented(client: httpx.AsyncClient) -> None:
    schema = (await client.get("/openapi.json")).json()
    body = schema["paths"]["/kb/documents"]["post"]["requestBody"]["content"]
    for media_type in ("multipart/form-data", "application/json"):
        field = body[media_type]["schema"]["properties"]["collection_id"]
        assert "collection_not_found" in field["description"], media_type
