"""Admin audit of turns' context metadata, and the append-only log of admin reads."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.db import scope_to_tenant
from app.models import ChatSession, QueryHistory, Tenant, User
from tests.factories import LoggedIn, login, make_session, make_tenant, make_user

T0 = datetime(2026, 1, 1, tzinfo=UTC)


async def _turn(
    db: AsyncSession,
    chat: ChatSession,
    *,
    day: int,
    composition: str,
    quality: float,
    truncated: bool,
) -> str:
    await scope_to_tenant(db, chat.tenant_id)
    turn = QueryHistory(
        tenant_id=chat.tenant_id,
        session_id=chat.id,
        user_id=chat.user_id,
        user_query=f"question of day {day}",
        answer=f"answer of day {day}",
        status="complete",
        query_composition=composition,
        context_metadata={
            "query_composition": composition,
            "quality_score": quality,
            "truncation_applied": truncated,
        },
        created_at=T0 + timedelta(days=day),
    )
    db.add(turn)
    await db.commit()
    return str(turn.id)


class World:
    tenant: Tenant
    admin: LoggedIn
    member: LoggedIn
    alice: User
    bob: User
    alice_chat: ChatSession
    turns: dict[str, str]  # name -> id


async def _world(client: httpx.AsyncClient, db: AsyncSession) -> World:
    w = World()
    w.tenant = await make_tenant(db)
    w.admin = await login(client, await make_user(db, w.tenant, role="admin"))
    w.alice = await make_user(db, w.tenant)
    w.bob = await make_user(db, w.tenant)
    w.member = await login(client, w.alice)
    w.alice_chat = await make_session(db, w.alice)
    alice_second = await make_session(db, w.alice)
    bob_chat = await make_session(db, w.bob)
    w.turns = {
        "a1": await _turn(
            db, w.alice_chat, day=1, composition="pure_kb", quality=0.9, truncated=False
        ),
        "a2": await _turn(
            db, w.alice_chat, day=2, composition="hybrid", quality=0.4, truncated=True
        ),
        "a3": await _turn(
            db, alice_second, day=3, composition="chat", quality=0.1, truncated=False
        ),
        "b1": await _turn(db, bob_chat, day=4, composition="pure_kb", quality=0.7, truncated=True),
        "b2": await _turn(
            db, bob_chat, day=5, composition="pure_doc", quality=0.95, truncated=False
        ),
    }
    return w


async def _listed(client: httpx.AsyncClient, w: World, **params: Any) -> list[str]:
    response = await client.get("/admin/audit/turns", params=params, headers=w.admin.headers)
    assert response.status_code == 200, response.text
    names = {v: k for k, v in w.turns.items()}
    return [names[item["turn_id"]] for item in response.json()["items"]]


async def test_each_filter_and_their_combinations_select_exactly_the_matching_turns(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    w = await _world(client, db)
    other = await make_session(db, await make_user(db, await make_tenant(db)))
    await _turn(db, other, day=3, composition="pure_kb", quality=0.9, truncated=False)

    assert await _listed(client, w) == ["b2", "b1", "a3", "a2", "a1"]
    assert await _listed(client, w, user_id=str(w.alice.id)) == ["a3", "a2", "a1"]
    assert await _listed(client, w, session_id=str(w.alice_chat.id)) == ["a2", "a1"]
    assert await _listed(client, w, since=(T0 + timedelta(days=3)).isoformat()) == [
        "b2",
        "b1",
        "a3",
    ]
    assert await _listed(client, w, until=(T0 + timedelta(days=3)).isoformat()) == ["a2", "a1"]
    assert await _listed(client, w, composition="pure_kb") == ["b1", "a1"]
    assert await _listed(client, w, min_quality=0.7) == ["b2", "b1", "a1"]
    assert await _listed(client, w, max_quality=0.4) == ["a3", "a2"]
    assert await _listed(client, w, truncated="true") == ["b1", "a2"]
    assert await _listed(client, w, truncated="false") == ["b2", "a3", "a1"]
    assert await _listed(
        client, w, user_id=str(w.bob.id), composition="pure_kb", truncated="true"
    ) == ["b1"]
    assert await _listed(client, w, min_quality=0.3, max_quality=0.8, truncated="true") == [
        "b1",
        "a2",
    ]
    assert await _listed(client, w, user_id=str(w.alice.id), min_quality=0.95) == []


async def test_pages_follow_the_cursor_through_every_turn_once(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    w = await _world(client, db)
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        response = await client.get("/admin/audit/turns", params=params, headers=w.admin.headers)
        body = response.json()
        seen += [item["turn_id"] for item in body["items"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert seen == [w.turns[n] for n in ("b2", "b1", "a3", "a2", "a1")]
    bad = await client.get("/admin/audit/turns?cursor=nope", headers=w.admin.headers)
    assert bad.status_code == 400
    assert (
        await client.get("/admin/audit/turns?min_quality=2", headers=w.admin.headers)
    ).status_code == 422
    assert (
        await client.get("/admin/audit/turns?composition=other", headers=w.admin.headers)
    ).status_code == 422


async def test_one_turn_in_full_and_the_walls_around_it(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    w = await _world(client, db)
    turn_id = w.turns["a2"]
    response = await client.get(f"/admin/audit/turns/{turn_id}", headers=w.admin.headers)
    assert response.status_code == 200
    record = response.json()
    assert record["user_query"] == "question of day 2"
    assert record["answer"] == "answer of day 2"
    assert record["query_composition"] == "hybrid"
    assert record["context_metadata"]["truncation_applied"] is True
    assert record["user_id"] == str(w.alice.id)

    for path in ("/admin/audit/turns", f"/admin/audit/turns/{turn_id}", "/admin/audit/log"):
        denied = await client.get(path, headers=w.member.headers)
        assert denied.status_code == 403, path
        assert denied.json()["error"]["code"] == "admin_required"
    foreign = await login(client, await make_user(db, await make_tenant(db), role="admin"))
    hidden = await client.get(f"/admin/audit/turns/{turn_id}", headers=foreign.headers)
    assert hidden.status_code == 404
    assert hidden.json()["error"]["code"] == "turn_not_found"
    assert (
        await client.get(f"/admin/audit/turns/{uuid.uuid4()}", headers=w.admin.headers)
    ).status_code == 404
    listed = await client.get("/admin/audit/turns", headers=foreign.headers)
    assert listed.json()["items"] == []


async def test_every_admin_read_is_logged_with_its_filters(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    w = await _world(client, db)
    await client.get(
        "/admin/audit/turns",
        params={"user_id": str(w.bob.id), "truncated": "true"},
        headers=w.admin.headers,
    )
    await client.get(f"/admin/audit/turns/{w.turns['a1']}", headers=w.admin.headers)
    await client.get("/admin/audit/turns", headers=w.member.headers)  # refused: not logged

    response = await client.get("/admin/audit/log", headers=w.admin.headers)
    assert response.status_code == 200
    entries = response.json()["items"]
    assert [e["action"] for e in entries] == ["audit.turn.read", "audit.turns.list"]
    read, listing = entries
    assert read["actor_user_id"] == str(w.admin.user.id)
    assert read["target_user_id"] == str(w.alice.id)
    assert read["resource"] == f"turns/{w.turns['a1']}"
    assert listing["target_user_id"] == str(w.bob.id)
    assert listing["details"]["filters"] == {"user_id": str(w.bob.id), "truncated": True}
    assert listing["details"]["returned"] == 1
    assert listing["details"]["users"] == [str(w.bob.id)]
    assert datetime.fromisoformat(read["created_at"]) >= datetime.fromisoformat(
        listing["created_at"]
    )
    page = await client.get("/admin/audit/log?limit=1", headers=w.admin.headers)
    second = await client.get(
        f"/admin/audit/log?limit=1&cursor={page.json()['next_cursor']}", headers=w.admin.headers
    )
    assert [e["action"] for e in second.json()["items"]] == ["audit.turns.list"]
    assert second.json()["next_cursor"] is None
    filtered = await client.get(
        "/admin/audit/log", params={"target_user_id": str(w.alice.id)}, headers=w.admin.headers
    )
    assert [e["action"] for e in filtered.json()["items"]] == ["audit.turn.read"]


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE audit_log SET action = 'nothing happened'",
        "DELETE FROM audit_log",
        "TRUNCATE audit_log",
    ],
)
async def test_the_application_role_cannot_change_the_audit_log(
    client: httpx.AsyncClient, db: AsyncSession, statement: str
) -> None:
    w = await _world(client, db)
    await client.get(f"/admin/audit/turns/{w.turns['a1']}", headers=w.admin.headers)
    await scope_to_tenant(db, w.tenant.id)
    assert await db.scalar(text("SELECT count(*) FROM audit_log")) == 1
    await db.commit()
    await scope_to_tenant(db, w.tenant.id)
    with pytest.raises(DBAPIError, match="permission denied"):
        await db.execute(text(statement))
    await db.rollback()
