"""Every endpoint that takes an object id answers 404 to anyone but the object's owner."""

from __future__ import annotations

import uuid

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncSession

from tests.factories import LoggedIn, login, make_session, make_tenant, make_user

# (method, path template, JSON body). `{id}` is replaced by the object's id.
SESSION_ENDPOINTS = [
    ("GET", "/sessions/{id}", None),
    ("PATCH", "/sessions/{id}", {"title": "stolen"}),
    ("GET", "/sessions/{id}/turns", None),
    ("DELETE", "/sessions/{id}", None),
]


@pytest.fixture
async def owner_and_strangers(
    client: httpx.AsyncClient, db: AsyncSession
) -> tuple[LoggedIn, dict[str, LoggedIn]]:
    tenant = await make_tenant(db)
    owner = await login(client, await make_user(db, tenant, role="admin"))
    strangers = {
        "same tenant, other user": await login(client, await make_user(db, tenant)),
        "same tenant, an admin": await login(client, await make_user(db, tenant, role="admin")),
        "other tenant": await login(
            client, await make_user(db, await make_tenant(db), role="admin")
        ),
    }
    return owner, strangers


@pytest.mark.parametrize(("method", "path", "body"), SESSION_ENDPOINTS)
async def test_session_endpoints_hide_other_peoples_sessions(
    client: httpx.AsyncClient,
    db: AsyncSession,
    owner_and_strangers: tuple[LoggedIn, dict[str, LoggedIn]],
    method: str,
    path: str,
    body: dict[str, str] | None,
) -> None:
    owner, strangers = owner_and_strangers
    chat = await make_session(db, owner.user, title="private")
    url = path.format(id=chat.id)
    for who, stranger in strangers.items():
        response = await client.request(method, url, json=body, headers=stranger.headers)
        assert response.status_code == 404, who
        assert response.json()["error"]["code"] == "session_not_found", who
    # The same answer as for an id that does not exist at all.
    unknown = await client.request(
        method, path.format(id=uuid.uuid4()), json=body, headers=owner.headers
    )
    assert unknown.status_code == 404
    # And the owner still has it, untouched.
    mine = await client.get(f"/sessions/{chat.id}", headers=owner.headers)
    assert mine.status_code == 200
    assert mine.json()["title"] == "private"


async def test_session_lists_show_only_ones_own(
    client: httpx.AsyncClient,
    db: AsyncSession,
    owner_and_strangers: tuple[LoggedIn, dict[str, LoggedIn]],
) -> None:
    owner, strangers = owner_and_strangers
    await make_session(db, owner.user)
    for who, stranger in strangers.items():
        listed = await client.get("/sessions", headers=stranger.headers)
        assert listed.json()["items"] == [], who


async def test_api_keys_of_another_tenant_cannot_be_revoked(
    client: httpx.AsyncClient,
    owner_and_strangers: tuple[LoggedIn, dict[str, LoggedIn]],
) -> None:
    owner, strangers = owner_and_strangers
    key = await client.post("/admin/api-keys", json={"name": "mine"}, headers=owner.headers)
    key_id = key.json()["id"]
    response = await client.delete(
        f"/admin/api-keys/{key_id}", headers=strangers["other tenant"].headers
    )
    assert response.status_code == 404
    still_works = await client.get("/me", headers={"X-API-Key": key.json()["key"]})
    assert still_works.status_code == 200
