"""PATCH /sessions/{id} {"pinned": true}: a pinned conversation is listed apart (the web
app shows it first, under "Pinned"); another user's session is 404."""

from __future__ import annotations

import httpx
from sqlalchemy.ext.asyncio import AsyncSession

from tests.factories import login, make_session, make_tenant, make_user


async def _titles(client: httpx.AsyncClient, headers: dict[str, str], **params: str) -> list[str]:
    page = await client.get("/sessions", params=params, headers=headers)
    assert page.status_code == 200, page.text
    return [s["title"] for s in page.json()["items"]]


async def test_pinning_lists_a_session_apart_and_unpinning_puts_it_back(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    user = await make_user(db, await make_tenant(db))
    chats = [await make_session(db, user, title=f"c{i}") for i in range(4)]
    owner = await login(client, user)

    pinned = await client.patch(
        f"/sessions/{chats[1].id}", json={"pinned": True}, headers=owner.headers
    )
    assert pinned.status_code == 200, pinned.text
    assert pinned.json()["pinned"] is True
    assert pinned.json()["title"] == "c1"  # pinning leaves the title alone
    assert await _titles(client, owner.headers, pinned="true") == ["c1"]
    assert await _titles(client, owner.headers, pinned="false") == ["c3", "c2", "c0"]
    everything = (await client.get("/sessions", headers=owner.headers)).json()["items"]
    assert [(s["title"], s["pinned"]) for s in everything] == [
        ("c3", False),
        ("c2", False),
        ("c1", True),
        ("c0", False),
    ]
    read = await client.get(f"/sessions/{chats[1].id}", headers=owner.headers)
    assert read.json()["pinned"] is True

    both = await client.patch(
        f"/sessions/{chats[1].id}",
        json={"pinned": False, "title": "Renamed"},
        headers=owner.headers,
    )
    assert both.status_code == 200
    assert (both.json()["pinned"], both.json()["title"]) == (False, "Renamed")
    assert await _titles(client, owner.headers, pinned="true") == []


async def test_pinning_needs_a_change_and_refuses_null(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    user = await make_user(db, await make_tenant(db))
    chat = await make_session(db, user, title="Kept")
    owner = await login(client, user)
    for body in (
        {},
        {"pinned": None},
        {"title": None},
        {"pinned": "yes"},
        {"pinned": True, "x": 1},
    ):
        response = await client.patch(f"/sessions/{chat.id}", json=body, headers=owner.headers)
        assert response.status_code == 422, body
        assert response.json()["error"]["code"] == "validation_error"
    read = (await client.get(f"/sessions/{chat.id}", headers=owner.headers)).json()
    assert (read["title"], read["pinned"]) == ("Kept", False)
    wrong = await client.get("/sessions", params={"pinned": "maybe"}, headers=owner.headers)
    assert wrong.status_code == 422


async def test_another_users_session_cannot_be_pinned(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    alice = await make_user(db, tenant)
    chat = await make_session(db, alice)
    for other in (
        await make_user(db, tenant),
        await make_user(db, tenant, role="admin"),
        await make_user(db, await make_tenant(db)),
    ):
        them = await login(client, other)
        response = await client.patch(
            f"/sessions/{chat.id}", json={"pinned": True}, headers=them.headers
        )
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "session_not_found"
        assert await _titles(client, them.headers, pinned="true") == []
    mine = await login(client, alice)
    assert await _titles(client, mine.headers, pinned="true") == []
