"""A tenant with a public collection and a board-only one, and the four kinds of caller the
permission tests compare: a member of the board group, a member outside it, an admin, and a
user of another tenant."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import httpx
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import KbDocument, Tenant
from tests.chat_helpers import add_kb_document
from tests.factories import LoggedIn, login, make_tenant, make_user

SECRET_TITLE = "Board minutes"
SECRET = ["The zephyr merger closes in March, the board decided in its closed session."]
PUBLIC_TITLE = "Cafeteria menu"
PUBLIC = ["The cafeteria serves lentil soup on Mondays and fish on Fridays."]
QUESTION = "When does the zephyr merger close?"
ROLES = ("member", "non_member", "admin", "other_tenant")


@dataclass
class World:
    """Who is who, and where the board's document lives."""

    tenant: Tenant
    other: Tenant
    callers: dict[str, LoggedIn]
    group_id: str
    board_id: str
    secret: KbDocument
    public: KbDocument


async def make_world(client: httpx.AsyncClient, db: AsyncSession) -> World:
    """Build the world through the admin API: group, members, collection, the move."""
    tenant = await make_tenant(db)
    admin = await login(client, await make_user(db, tenant, role="admin"))
    member = await login(client, await make_user(db, tenant))
    outsider = await login(client, await make_user(db, tenant))
    other = await make_tenant(db)
    stranger = await login(client, await make_user(db, other, role="admin"))
    public = await add_kb_document(db, tenant, PUBLIC_TITLE, PUBLIC)
    secret = await add_kb_document(db, tenant, SECRET_TITLE, SECRET)
    await add_kb_document(db, other, "Their menu", ["Their cafeteria serves noodles."])
    group = await client.post("/admin/groups", json={"name": "Board"}, headers=admin.headers)
    assert group.status_code == 201, group.text
    group_id = group.json()["id"]
    added = await client.post(
        f"/admin/groups/{group_id}/members",
        json={"email": member.user.email},
        headers=admin.headers,
    )
    assert added.status_code == 201, added.text
    board = await client.post(
        "/admin/collections",
        json={"name": "Board room", "visibility": "groups", "group_ids": [group_id]},
        headers=admin.headers,
    )
    assert board.status_code == 201, board.text
    board_id = board.json()["id"]
    moved = await client.post(
        f"/admin/collections/{board_id}/documents",
        json={"document_id": str(secret.id)},
        headers=admin.headers,
    )
    assert moved.status_code == 200, moved.text
    callers = {
        "member": member,
        "non_member": outsider,
        "admin": admin,
        "other_tenant": stranger,
    }
    return World(tenant, other, callers, group_id, board_id, secret, public)


async def new_session(client: httpx.AsyncClient, who: LoggedIn) -> str:
    """A new chat session of `who`."""
    created = await client.post("/sessions", json={}, headers=who.headers)
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def secret_rows(items: list[dict[str, object]], world: World, key: str) -> int:
    """How many of `items` come from the board's document (by `key`)."""
    return sum(1 for item in items if str(item.get(key)) == str(world.secret.id))


def uid(value: str) -> uuid.UUID:
    """A UUID from its string."""
    return uuid.UUID(value)
