"""A turn's manifest: typed, versioned with its row, published in the OpenAPI document, and
old rows (no version: as the code before the model wrote them) still read unchanged."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.conversation.turn.manifest import MANIFEST_VERSION, SECTIONS, Manifest
from app.core.db import scope_to_tenant
from app.models import QueryHistory
from tests.chat_helpers import add_kb_document
from tests.factories import login, make_session, make_tenant, make_user

# Two manifests as the code before the typed model stored them (captured from a knowledge-base
# answer and a small-talk answer of the base commit's `/chat`).
V1_ROWS: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent.parent / "data" / "manifest_v1.json").read_text()
)


def test_a_manifest_reads_and_writes_back_exactly_what_was_stored() -> None:
    for row in V1_ROWS:
        stored = row["context_metadata"]
        assert Manifest.read(stored, None).dump() == stored
        assert json.loads(Manifest.read(stored).model_dump_json()) == stored


def test_the_public_manifest_leaves_out_the_audit_part_only() -> None:
    stored = {**V1_ROWS[0]["context_metadata"], "audit": {"original_answer": "as generated"}}
    public = Manifest.read(stored).public().dump()
    assert "audit" not in public
    assert public == {k: v for k, v in stored.items() if k != "audit"}


def test_a_manifest_newer_than_the_release_is_refused() -> None:
    with pytest.raises(ValueError, match="newer"):
        Manifest.read({}, MANIFEST_VERSION + 1)


async def test_a_row_without_a_version_reads_through_the_audit_and_the_session(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    admin = await login(client, await make_user(db, tenant, role="admin"))
    user = await make_user(db, tenant)
    owner = await login(client, user)
    chat = await make_session(db, user)
    stored = {**V1_ROWS[0]["context_metadata"], "audit": {"original_answer": "as generated"}}
    await scope_to_tenant(db, tenant.id)
    turn = QueryHistory(
        tenant_id=tenant.id,
        session_id=chat.id,
        user_id=user.id,
        user_query=V1_ROWS[0]["query"],
        answer="Within 30 days [1].",
        status="complete",
        query_composition="pure_kb",
        context_metadata=stored,
    )
    db.add(turn)
    await db.commit()
    assert turn.manifest_version is None

    audited = await client.get(f"/admin/audit/turns/{turn.id}", headers=admin.headers)
    assert audited.status_code == 200, audited.text
    assert audited.json()["context_metadata"] == stored
    listed = await client.get(f"/sessions/{chat.id}/turns", headers=owner.headers)
    assert listed.status_code == 200, listed.text
    (item,) = listed.json()["items"]
    assert item["context_metadata"] == {k: v for k, v in stored.items() if k != "audit"}


async def test_a_new_turn_stores_its_manifest_with_the_current_version(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    user = await make_user(db, tenant)
    await add_kb_document(db, tenant, "Returns policy", ["Refunds within 30 days of delivery."])
    chat = await make_session(db, user)
    owner = await login(client, user)
    response = await client.post(
        "/chat",
        json={"session_id": str(chat.id), "message": "How long is the refund window?"},
        headers=owner.headers,
    )
    assert response.status_code == 200, response.text
    await scope_to_tenant(db, tenant.id)
    row = (
        await db.execute(
            select(QueryHistory).where(QueryHistory.id == uuid.UUID(response.json()["turn_id"]))
        )
    ).scalar_one()
    await db.refresh(row)
    assert row.manifest_version == MANIFEST_VERSION
    manifest = Manifest.read(row.context_metadata, row.manifest_version)
    assert manifest.dump() == row.context_metadata
    assert response.json()["context_metadata"] == manifest.public().dump()
    assert manifest.sources and manifest.sources[0].kind == "kb"
    assert manifest.token_budget is not None and manifest.token_budget > 0


async def test_the_openapi_document_publishes_the_manifest_and_its_sections(
    client: httpx.AsyncClient,
) -> None:
    document = (await client.get("/openapi.json")).json()
    schemas = document["components"]["schemas"]
    manifest = schemas["Manifest"]
    assert set(manifest["x-sections"]) == set(SECTIONS)
    assert manifest["x-version"] == MANIFEST_VERSION
    assert {"quality_score", "sources", "triage", "validation", "tools"} <= set(
        manifest["properties"]
    )
    reference = {"$ref": "#/components/schemas/Manifest"}
    for model in ("ChatResponse", "AuditTurn", "AuditTurnRecord", "TurnResponse"):
        assert schemas[model]["properties"]["context_metadata"] == reference or (
            reference in schemas[model]["properties"]["context_metadata"].get("allOf", [])
        ), model
