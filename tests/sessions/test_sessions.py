"""Session lifecycle and cursor pagination for the session's owner."""

from __future__ import annotations

import httpx
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.db import scope_to_tenant
from app.models import QueryHistory
from tests.factories import login, make_session, make_tenant, make_turn, make_user


async def test_create_read_rename_delete(client: httpx.AsyncClient, db: AsyncSession) -> None:
    owner = await login(client, await make_user(db, await make_tenant(db)))
    created = await client.post(
        "/sessions", json={"title": "  Quarterly   report "}, headers=owner.headers
    )
    assert created.status_code == 201
    body = created.json()
    assert body["title"] == "Quarterly report"
    assert {"id", "title", "created_at"} <= body.keys()

    read = await client.get(f"/sessions/{body['id']}", headers=owner.headers)
    assert read.json()["title"] == "Quarterly report"

    renamed = await client.patch(
        f"/sessions/{body['id']}", json={"title": "Q3"}, headers=owner.headers
    )
    assert renamed.status_code == 200
    assert renamed.json()["title"] == "Q3"

    deleted = await client.delete(f"/sessions/{body['id']}", headers=owner.headers)
    assert deleted.status_code == 204
    gone = await client.get(f"/sessions/{body['id']}", headers=owner.headers)
    assert gone.status_code == 404
    assert gone.json()["error"]["code"] == "session_not_found"


async def test_create_without_a_body_uses_a_default_title(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    owner = await login(client, await make_user(db, await make_tenant(db)))
    created = await client.post("/sessions", headers=owner.headers)
    assert created.status_code == 201
    assert created.json()["title"] == "New conversation"


async def test_titles_are_validated(client: httpx.AsyncClient, db: AsyncSession) -> None:
    owner = await login(client, await make_user(db, await make_tenant(db)))
    for body in (
        {"title": "   "},
        {"title": "x" * 201},
        {"title": 42},
        {"title": "ok", "extra": 1},
    ):
        response = await client.post("/sessions", json=body, headers=owner.headers)
        assert response.status_code == 422, body
        assert response.json()["error"]["code"] == "validation_error"


async def test_listing_pages_through_every_session_once_newest_first(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    user = await make_user(db, await make_tenant(db))
    owner = await login(client, user)
    created = [
        (await client.post("/sessions", json={"title": f"s{i}"}, headers=owner.headers)).json()[
            "id"
        ]
        for i in range(5)
    ]
    await make_session(db, await make_user(db, await make_tenant(db)))  # someone else's

    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        params: dict[str, str | int] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = (await client.get("/sessions", params=params, headers=owner.headers)).json()
        seen += [item["id"] for item in page["items"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 3
    assert seen == list(reversed(created))


async def test_bad_cursor_and_limit_are_client_errors(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    owner = await login(client, await make_user(db, await make_tenant(db)))
    bad_cursor = await client.get("/sessions", params={"cursor": "%%%"}, headers=owner.headers)
    assert bad_cursor.status_code == 400
    assert bad_cursor.json()["error"]["code"] == "invalid_cursor"
    bad_limit = await client.get("/sessions", params={"limit": 0}, headers=owner.headers)
    assert bad_limit.status_code == 422


async def test_turns_are_listed_and_deleted_with_their_session(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    user = await make_user(db, await make_tenant(db))
    owner = await login(client, user)
    chat = await make_session(db, user)
    for i in range(3):
        await make_turn(db, chat, user_query=f"question {i}")

    turns = await client.get(
        f"/sessions/{chat.id}/turns", params={"limit": 2}, headers=owner.headers
    )
    assert turns.status_code == 200
    page = turns.json()
    assert [t["user_query"] for t in page["items"]] == ["question 2", "question 1"]
    assert set(page["items"][0]) >= {
        "id",
        "user_query",
        "answer",
        "query_composition",
        "status",
        "created_at",
    }
    rest = await client.get(
        f"/sessions/{chat.id}/turns",
        params={"limit": 2, "cursor": page["next_cursor"]},
        headers=owner.headers,
    )
    assert [t["user_query"] for t in rest.json()["items"]] == ["question 0"]
    assert rest.json()["next_cursor"] is None

    assert (await client.delete(f"/sessions/{chat.id}", headers=owner.headers)).status_code == 204
    await scope_to_tenant(db, user.tenant_id)
    remaining = await db.scalar(
        select(func.count()).select_from(QueryHistory).where(QueryHistory.session_id == chat.id)
    )
    assert remaining == 0


async def test_search_matches_titles_and_turns_of_the_callers_own_sessions_only(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    user = await make_user(db, tenant)
    owner = await login(client, user)
    by_title = await make_session(db, user, title="Budget for the ZEPHYR launch")
    by_question = await make_session(db, user, title="Tuesday")
    await make_turn(db, by_question, user_query="When is zephyr due?", answer="Soon.")
    by_answer = await make_session(db, user, title="Wednesday")
    await make_turn(db, by_answer, user_query="What ships next?", answer="The Zephyr module.")
    unrelated = await make_session(db, user, title="Holidays")
    await make_turn(db, unrelated, user_query="Where to?", answer="The sea.")
    # Someone else in the same tenant, and someone in another tenant: same words, never listed.
    neighbour = await make_user(db, tenant)
    theirs = await make_session(db, neighbour, title="zephyr notes")
    await make_turn(db, theirs, user_query="zephyr?", answer="zephyr.")
    stranger = await make_user(db, await make_tenant(db))
    foreign = await make_session(db, stranger, title="zephyr abroad")
    await make_turn(db, foreign, user_query="zephyr?", answer="zephyr.")

    async def search(q: str, **params: str | int) -> list[str]:
        response = await client.get("/sessions", params={"q": q, **params}, headers=owner.headers)
        assert response.status_code == 200, response.text
        return [item["id"] for item in response.json()["items"]]

    expected = [str(by_answer.id), str(by_question.id), str(by_title.id)]  # newest first
    assert await search("zephyr") == expected
    assert await search("  ZePhYr ") == expected
    assert await search("nothing like it") == []
    # The wildcards of LIKE are literal text.
    assert await search("%") == []
    assert await search("_") == []
    # A blank query lists everything, as without one.
    assert len(await search("   ")) == 4

    # Paged like the plain listing.
    first = (
        await client.get("/sessions", params={"q": "zephyr", "limit": 2}, headers=owner.headers)
    ).json()
    assert [item["id"] for item in first["items"]] == expected[:2]
    rest = await search("zephyr", limit=2, cursor=first["next_cursor"])
    assert rest == expected[2:]

    # The others' own searches see only their own.
    neighbour_headers = (await login(client, neighbour)).headers
    listed = await client.get("/sessions", params={"q": "zephyr"}, headers=neighbour_headers)
    assert [item["id"] for item in listed.json()["items"]] == [str(theirs.id)]
    stranger_headers = (await login(client, stranger)).headers
    listed = await client.get("/sessions", params={"q": "zephyr"}, headers=stranger_headers)
    assert [item["id"] for item in listed.json()["items"]] == [str(foreign.id)]

    too_long = await client.get("/sessions", params={"q": "x" * 201}, headers=owner.headers)
    assert too_long.status_code == 422
