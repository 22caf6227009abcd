"""DELETE /me and DELETE /admin/users/{id}: nothing of the user is left, nothing else goes."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from tests.chat.stream_driver import stream_until
from tests.chat_helpers import owner_connection, use_model
from tests.factories import login, make_chatter, make_tenant, make_user
from tests.fakes import ScriptedChatModel
from tests.privacy.helpers import make_footprint, redis_keys_naming, tables_naming

pytestmark = pytest.mark.committed


async def test_admin_erasure_leaves_nothing_of_the_user_and_everything_of_others(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, settings: Settings
) -> None:
    tenant, other_tenant = await make_tenant(db), await make_tenant(db)
    admin = await login(client, await make_user(db, tenant, role="admin"))
    victim = await make_footprint(app, client, db, settings, tenant, role="admin")
    neighbour = await make_footprint(app, client, db, settings, tenant)
    stranger = await make_footprint(app, client, db, settings, other_tenant)
    before_neighbour = await tables_naming(settings, neighbour.ids())
    before_stranger = await tables_naming(settings, stranger.ids())
    assert {"checkpoints", "checkpoint_blobs", "attachment_chunks"} <= set(before_neighbour)

    response = await client.delete(f"/admin/users/{victim.user.id}", headers=admin.headers)

    assert response.status_code == 200, response.text
    deleted = response.json()["deleted"]
    assert deleted["sessions"] == 2
    assert deleted["turns"] == 5
    assert deleted["attachments"] == 1
    assert deleted["chunks"] >= 1
    assert deleted["checkpoints"] >= 2
    assert deleted["cache_keys"] >= 2  # one history snapshot per session at least
    assert deleted["users"] == 1
    # Every table of the schema, past RLS: only the audit log names the user (it records
    # the erasure itself; accountability outlives the subject, docs/adr/0009).
    assert await tables_naming(settings, victim.ids()) == {"audit_log": 1}
    assert await redis_keys_naming(app, victim.ids(), victim.user.email) == []
    # Nobody else lost anything.
    assert await tables_naming(settings, neighbour.ids()) == before_neighbour
    assert await tables_naming(settings, stranger.ids()) == before_stranger
    assert (await client.get("/me", headers=victim.owner.headers)).status_code == 401
    assert (await client.get("/me", headers=neighbour.owner.headers)).status_code == 200

    again = await client.delete(f"/admin/users/{victim.user.id}", headers=admin.headers)
    assert again.status_code == 404  # idempotent: a repeat finds nothing and changes nothing
    assert await tables_naming(settings, neighbour.ids()) == before_neighbour
    async with owner_connection(settings) as probe:
        actions = (
            await probe.execute(
                # This test's tenants: the run's other committed tenants (the browser tests'
                # shared world) keep their own audit rows.
                text(
                    "SELECT action, details FROM audit_log "
                    "WHERE tenant_id IN (:tenant, :other) ORDER BY id"
                ),
                {"tenant": tenant.id, "other": other_tenant.id},
            )
        ).all()
    assert [a.action for a in actions] == ["user.erased"]
    assert actions[0].details["deleted"]["turns"] == 5


async def test_self_erasure_removes_the_account_and_reports_counts(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, settings: Settings
) -> None:
    tenant = await make_tenant(db)
    me = await make_footprint(app, client, db, settings, tenant)
    neighbour = await make_footprint(app, client, db, settings, tenant)
    before = await tables_naming(settings, neighbour.ids())

    response = await client.delete("/me", headers=me.owner.headers)

    assert response.status_code == 200, response.text
    assert response.json()["deleted"]["sessions"] == 2
    assert response.json()["deleted"]["turns"] == 5
    assert set(await tables_naming(settings, me.ids())) <= {"audit_log"}
    assert await redis_keys_naming(app, me.ids(), me.user.email) == []
    assert await tables_naming(settings, neighbour.ids()) == before
    assert (await client.delete("/me", headers=me.owner.headers)).status_code == 401


async def test_a_repeated_erasure_purges_what_redis_still_holds_but_answers_404(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant, other = await make_tenant(db), await make_tenant(db)
    admin = await login(client, await make_user(db, tenant, role="admin"))
    foreign_admin = await login(client, await make_user(db, other, role="admin"))
    victim = await make_user(db, tenant)
    first = await client.delete(f"/admin/users/{victim.id}", headers=admin.headers)
    assert first.status_code == 200
    # Redis was down during the first erasure: a key naming the user survived it.
    redis = app.state.resources.redis
    leftover = redis.key("quota", "u", victim.id, 1)
    await redis.client.set(leftover, 5)

    foreign = await client.delete(f"/admin/users/{victim.id}", headers=foreign_admin.headers)
    assert foreign.status_code == 404
    assert await redis.client.exists(leftover)  # another tenant may not touch it

    again = await client.delete(f"/admin/users/{victim.id}", headers=admin.headers)
    assert again.status_code == 404
    assert again.json()["error"]["code"] == "user_not_found"
    assert not await redis.client.exists(leftover)


async def test_admins_erase_only_in_their_tenant_and_members_not_at_all(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant, other = await make_tenant(db), await make_tenant(db)
    member = await login(client, await make_user(db, tenant))
    colleague = await make_user(db, tenant)
    foreign_admin = await login(client, await make_user(db, other, role="admin"))

    forbidden = await client.delete(f"/admin/users/{colleague.id}", headers=member.headers)
    assert forbidden.status_code == 403
    hidden = await client.delete(f"/admin/users/{colleague.id}", headers=foreign_admin.headers)
    assert hidden.status_code == 404
    assert hidden.json()["error"]["code"] == "user_not_found"
    colleague_login = await login(client, colleague)
    assert (await client.get("/me", headers=colleague_login.headers)).status_code == 200


async def test_erasure_during_a_running_turn_stops_it_and_leaves_nothing_in_redis(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, settings: Settings
) -> None:
    _tenant, user, chat, owner = await make_chatter(client, db)
    model = ScriptedChatModel(reply=lambda _: " ".join(["word"] * 200), token_delay=0.02)
    use_model(app, model)
    headers = {**owner.headers, "Idempotency-Key": "erase-me-mid-turn"}
    body = {"session_id": str(chat.id), "message": "a long answer, please"}
    streaming = asyncio.create_task(stream_until(app, headers, body, lambda _: False))
    for _ in range(500):
        if model.tokens_streamed >= 5:
            break
        await asyncio.sleep(0.01)
    assert model.tokens_streamed >= 5

    response = await client.delete("/me", headers=owner.headers)

    assert response.status_code == 200, response.text
    assert response.json()["deleted"]["turns"] == 1
    raw, stream_headers = await asyncio.wait_for(streaming, 10)
    assert b"event: done" in raw  # stopped, not left generating
    generated = model.tokens_streamed
    assert generated < 200
    await asyncio.sleep(0.5)  # the run's finishing writes (buffer, quota, snapshot, key)
    ids = {str(user.id), str(chat.id), stream_headers["x-turn-id"]}
    assert await redis_keys_naming(app, ids) == []
    assert set(await tables_naming(settings, ids)) <= {"audit_log"}
    assert model.tokens_streamed == generated
