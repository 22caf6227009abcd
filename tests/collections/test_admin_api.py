"""/admin/groups and /admin/collections: members by id or e-mail, names unique, another
tenant's objects 404, counts and sizes, a deletion in the background that removes the
documents, chunks and vectors, and every change in the audit log with before and after."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.db import scope_to_tenant
from app.groups.service import set_user_groups_by_name
from app.models import KbChunk, KbDocument
from tests.collections.world import make_world

pytestmark = pytest.mark.committed


async def test_groups_members_and_their_audit(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    world = await make_world(client, db)
    admin, member = world.callers["admin"], world.callers["member"]
    stranger = world.callers["other_tenant"]
    listed = await client.get("/admin/groups", headers=admin.headers)
    assert [(g["name"], g["members"]) for g in listed.json()["items"]] == [("Board", 1)]
    again = await client.post(
        f"/admin/groups/{world.group_id}/members",
        json={"user_id": str(member.user.id)},
        headers=admin.headers,
    )
    assert again.status_code == 200  # already a member: nothing changes
    taken = await client.post("/admin/groups", json={"name": "Board"}, headers=admin.headers)
    assert taken.status_code == 409
    both = await client.post(
        f"/admin/groups/{world.group_id}/members",
        json={"user_id": str(member.user.id), "email": member.user.email},
        headers=admin.headers,
    )
    assert both.status_code == 422
    for path in (f"/admin/groups/{world.group_id}", f"/admin/collections/{world.board_id}"):
        assert (await client.get(path, headers=stranger.headers)).status_code == 404
        assert (await client.get(path, headers=member.headers)).status_code == 403
    renamed = await client.patch(
        f"/admin/groups/{world.group_id}", json={"name": "Directors"}, headers=admin.headers
    )
    assert renamed.json()["name"] == "Directors"
    log = (await client.get("/admin/audit/log", headers=admin.headers)).json()["items"]
    actions = {e["action"]: e["details"] for e in log}
    assert actions["group.rename"] == {"before": "Board", "after": "Directors"}
    assert actions["group.member_add"] == {"before": False, "after": True}
    assert actions["collection.create"]["after"] == {
        "name": "Board room",
        "visibility": "groups",
        "group_ids": [world.group_id],
    }
    assert actions["collection.document_move"]["after"] == world.board_id

    # Single sign-on's entry point: a user's groups set by name, audited.
    await scope_to_tenant(db, world.tenant.id)
    names = await set_user_groups_by_name(
        db, world.tenant.id, member.user.id, ["Engineering"], create_missing=True
    )
    await db.commit()
    assert names == ["Engineering"]
    detail = await client.get(f"/admin/groups/{world.group_id}", headers=admin.headers)
    assert detail.json()["member_list"] == []
    exported = await client.get("/me/export", headers=member.headers)
    assert exported.json()["groups"] == ["Engineering"]


async def test_a_collection_is_deleted_in_the_background_with_its_chunks(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    world = await make_world(client, db)
    admin = world.callers["admin"]
    listed = (await client.get("/admin/collections", headers=admin.headers)).json()["items"]
    by_name = {c["name"]: c for c in listed}
    assert by_name["Board room"]["documents"] == 1 and by_name["Board room"]["chunks"] == 1
    assert by_name["General"]["documents"] == 1 and by_name["General"]["is_default"]
    default = by_name["General"]["id"]
    refused = await client.delete(f"/admin/collections/{default}", headers=admin.headers)
    assert refused.status_code == 409

    deleting = await client.delete(f"/admin/collections/{world.board_id}", headers=admin.headers)
    assert deleting.status_code == 202, deleting.text
    assert deleting.json()["status"] == "deleting"
    await app.state.resources.jobs.drain()
    gone = await client.get(f"/admin/collections/{world.board_id}", headers=admin.headers)
    assert gone.status_code == 404
    await scope_to_tenant(db, world.tenant.id)
    documents = await db.scalar(select(func.count()).select_from(KbDocument))
    chunks = await db.scalar(select(func.count()).where(KbChunk.document_id == world.secret.id))
    await db.commit()
    assert (documents, chunks) == (1, 0)  # the public document stays
    log = (await client.get("/admin/audit/log", headers=admin.headers)).json()["items"]
    deleted = next(e for e in log if e["action"] == "collection.delete")
    assert deleted["details"]["before"]["name"] == "Board room"


async def test_erasure_removes_memberships_and_the_log_says_which(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    world = await make_world(client, db)
    admin, member = world.callers["admin"], world.callers["member"]
    erased = await client.delete(f"/admin/users/{member.user.id}", headers=admin.headers)
    assert erased.status_code == 200, erased.text
    detail = await client.get(f"/admin/groups/{world.group_id}", headers=admin.headers)
    assert detail.json()["member_list"] == []
    log = (await client.get("/admin/audit/log", headers=admin.headers)).json()["items"]
    entry = next(e for e in log if e["action"] == "group.memberships_erased")
    assert entry["details"] == {"before": [world.group_id], "after": []}
