"""POST /chat/{turn_id}/feedback: thumbs (and a comment) on one's own turns, stored per
turn, read back by the chat page, the admin audit (and its `feedback` filter), counted on
/metrics; another user's or tenant's turn is 404."""

from __future__ import annotations

import re
import uuid

import httpx
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.db import scope_to_tenant
from app.models import TurnFeedback
from tests.factories import login, make_session, make_tenant, make_turn, make_user


async def _stored(db: AsyncSession, tenant_id: uuid.UUID) -> list[tuple[str, str | None]]:
    await scope_to_tenant(db, tenant_id)
    rows = await db.execute(
        select(TurnFeedback.value, TurnFeedback.comment).where(TurnFeedback.tenant_id == tenant_id)
    )
    return [(row.value, row.comment) for row in rows]


async def test_a_thumb_is_stored_replaced_read_back_and_taken_back(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    user = await make_user(db, await make_tenant(db))
    chat = await make_session(db, user)
    turn = await make_turn(db, chat)
    owner = await login(client, user)

    up = await client.post(f"/chat/{turn.id}/feedback", json={"value": "up"}, headers=owner.headers)
    assert up.status_code == 200, up.text
    assert up.json()["value"] == "up" and up.json()["comment"] is None
    assert up.json()["turn_id"] == str(turn.id)

    # Changing one's mind replaces: still one row, the new value and comment.
    down = await client.post(
        f"/chat/{turn.id}/feedback",
        json={"value": "down", "comment": "  It missed the annual plans.  "},
        headers=owner.headers,
    )
    assert down.status_code == 200, down.text
    assert down.json()["comment"] == "It missed the annual plans."
    assert await _stored(db, user.tenant_id) == [("down", "It missed the annual plans.")]

    listed = await client.get(f"/sessions/{chat.id}/feedback", headers=owner.headers)
    assert listed.status_code == 200
    assert [(f["turn_id"], f["value"]) for f in listed.json()["items"]] == [(str(turn.id), "down")]

    cleared = await client.delete(f"/chat/{turn.id}/feedback", headers=owner.headers)
    assert cleared.status_code == 204
    assert await _stored(db, user.tenant_id) == []
    listed = await client.get(f"/sessions/{chat.id}/feedback", headers=owner.headers)
    assert listed.json()["items"] == []


async def test_bad_feedback_is_a_clear_json_error_and_changes_nothing(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    user = await make_user(db, await make_tenant(db))
    turn = await make_turn(db, await make_session(db, user))
    owner = await login(client, user)
    given = {"value": "up", "comment": "clear"}
    assert (
        await client.post(f"/chat/{turn.id}/feedback", json=given, headers=owner.headers)
    ).status_code == 200
    for body in (
        {},
        {"value": "meh"},
        {"value": 1},
        {"value": "down", "comment": "x" * 2001},
        {"value": "down", "comment": "nul \x00 inside"},
        {"value": "down", "extra": True},
    ):
        response = await client.post(f"/chat/{turn.id}/feedback", json=body, headers=owner.headers)
        assert response.status_code == 422, body
        assert response.json()["error"]["code"] == "validation_error", body
    assert await _stored(db, user.tenant_id) == [("up", "clear")]
    bad_id = await client.post("/chat/not-a-uuid/feedback", json=given, headers=owner.headers)
    assert bad_id.status_code == 422
    anonymous = await client.post(f"/chat/{turn.id}/feedback", json=given)
    assert anonymous.status_code == 401


async def test_another_users_or_tenants_turn_is_404_and_keeps_its_feedback(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    alice = await make_user(db, tenant)
    alice_chat = await make_session(db, alice)
    alice_turn = await make_turn(db, alice_chat)
    bob = await login(client, await make_user(db, tenant))
    admin = await login(client, await make_user(db, tenant, role="admin"))
    stranger = await login(client, await make_user(db, await make_tenant(db), role="admin"))
    mine = await login(client, alice)
    assert (
        await client.post(
            f"/chat/{alice_turn.id}/feedback", json={"value": "up"}, headers=mine.headers
        )
    ).status_code == 200

    for other in (bob, admin, stranger):
        for method, body in (("POST", {"value": "down"}), ("DELETE", None)):
            response = await client.request(
                method, f"/chat/{alice_turn.id}/feedback", json=body, headers=other.headers
            )
            assert response.status_code == 404, (method, response.text)
            assert response.json()["error"]["code"] == "turn_not_found"
        listed = await client.get(f"/sessions/{alice_chat.id}/feedback", headers=other.headers)
        assert listed.status_code == 404
        assert listed.json()["error"]["code"] == "session_not_found"
    unknown = await client.post(
        f"/chat/{uuid.uuid4()}/feedback", json={"value": "up"}, headers=mine.headers
    )
    assert unknown.status_code == 404
    assert await _stored(db, tenant.id) == [("up", None)]


async def test_a_turn_still_being_answered_cannot_be_judged_yet(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    user = await make_user(db, await make_tenant(db))
    turn = await make_turn(db, await make_session(db, user), status="pending")
    owner = await login(client, user)
    response = await client.post(
        f"/chat/{turn.id}/feedback", json={"value": "up"}, headers=owner.headers
    )
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "turn_pending"
    assert await _stored(db, user.tenant_id) == []


async def test_the_audit_shows_feedback_and_filters_by_it(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    user = await make_user(db, tenant)
    chat = await make_session(db, user)
    liked, disliked, silent = [await make_turn(db, chat, user_query=q) for q in "abc"]
    owner = await login(client, user)
    admin = await login(client, await make_user(db, tenant, role="admin"))
    for turn, body in (
        (liked, {"value": "up"}),
        (disliked, {"value": "down", "comment": "Wrong refund period."}),
    ):
        response = await client.post(f"/chat/{turn.id}/feedback", json=body, headers=owner.headers)
        assert response.status_code == 200

    record = (await client.get(f"/admin/audit/turns/{disliked.id}", headers=admin.headers)).json()
    assert record["feedback"]["value"] == "down"
    assert record["feedback"]["comment"] == "Wrong refund period."
    assert (await client.get(f"/admin/audit/turns/{silent.id}", headers=admin.headers)).json()[
        "feedback"
    ] is None

    async def listed(**params: str) -> dict[str, str | None]:
        page = await client.get("/admin/audit/turns", params=params, headers=admin.headers)
        assert page.status_code == 200, page.text
        return {t["turn_id"]: (t["feedback"] or {}).get("value") for t in page.json()["items"]}

    everything = await listed()
    assert everything == {str(liked.id): "up", str(disliked.id): "down", str(silent.id): None}
    assert await listed(feedback="up") == {str(liked.id): "up"}
    assert await listed(feedback="down") == {str(disliked.id): "down"}
    assert await listed(feedback="any") == {str(liked.id): "up", str(disliked.id): "down"}
    wrong = await client.get(
        "/admin/audit/turns", params={"feedback": "maybe"}, headers=admin.headers
    )
    assert wrong.status_code == 422


async def test_feedback_is_counted_on_metrics_by_value(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    def counted(text: str, value: str) -> float:
        found = re.search(rf'^threadline_feedback_total{{value="{value}"}} (\S+)$', text, re.M)
        return float(found.group(1)) if found else 0.0

    user = await make_user(db, await make_tenant(db))
    turn = await make_turn(db, await make_session(db, user))
    owner = await login(client, user)
    before = (await client.get("/metrics")).text
    for value in ("up", "down", "down"):
        response = await client.post(
            f"/chat/{turn.id}/feedback", json={"value": value}, headers=owner.headers
        )
        assert response.status_code == 200
    refused = await client.post(
        f"/chat/{uuid.uuid4()}/feedback", json={"value": "up"}, headers=owner.headers
    )
    assert refused.status_code == 404
    after = (await client.get("/metrics")).text
    assert counted(after, "up") - counted(before, "up") == 1
    assert counted(after, "down") - counted(before, "down") == 2


async def test_feedback_goes_with_its_turn(client: httpx.AsyncClient, db: AsyncSession) -> None:
    user = await make_user(db, await make_tenant(db))
    chat = await make_session(db, user)
    turn = await make_turn(db, chat)
    owner = await login(client, user)
    await client.post(f"/chat/{turn.id}/feedback", json={"value": "up"}, headers=owner.headers)
    assert (await client.delete(f"/sessions/{chat.id}", headers=owner.headers)).status_code == 204
    await scope_to_tenant(db, user.tenant_id)
    left = await db.scalar(
        select(func.count()).select_from(TurnFeedback).where(TurnFeedback.user_id == user.id)
    )
    assert left == 0
