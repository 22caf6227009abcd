"""Shared set-up of the data-rights tests: a user with real chat turns, checkpoints, an
attachment, an API key and caches, and a look past RLS at what the database holds."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import httpx
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.models import ChatSession, Tenant, User
from tests.chat_helpers import ask, owner_connection, stream_chat, wait_for_checkpoints
from tests.factories import LoggedIn, login, make_session, make_user
from tests.knowledge.files import make_pdf

CONTRACT = make_pdf(
    "Supply contract between Acme and Initech.",
    "The notice period for termination is ninety days.",
)


@dataclass
class Footprint:
    """A user and every id that names their data."""

    user: User
    owner: LoggedIn
    sessions: list[ChatSession]
    attachment_id: str
    turn_ids: list[str] = field(default_factory=list)

    def ids(self) -> set[str]:
        return {
            str(self.user.id),
            *(str(s.id) for s in self.sessions),
            self.attachment_id,
            *self.turn_ids,
        }


async def make_footprint(
    app: FastAPI,
    client: httpx.AsyncClient,
    db: AsyncSession,
    settings: Settings,
    tenant: Tenant,
    *,
    role: str = "member",
) -> Footprint:
    user = await make_user(db, tenant, role=role)
    owner = await login(client, user)
    sessions = [await make_session(db, user), await make_session(db, user)]
    upload = await client.post(
        "/attachments", files={"file": ("contract.pdf", CONTRACT)}, headers=owner.headers
    )
    assert upload.status_code == 201, upload.text
    await app.state.resources.jobs.drain()
    attachment_id = str(upload.json()["id"])
    footprint = Footprint(user, owner, sessions, attachment_id)
    first = await ask(client, owner, sessions[0], "What is the notice period?", [attachment_id])
    assert first.status_code == 200, first.text
    footprint.turn_ids.append(first.json()["turn_id"])
    # Feedback on an answer is the user's data too (issue 28, item 3).
    thumb = {"value": "down", "comment": "It missed the notice clause."}
    judged = await client.post(
        f"/chat/{first.json()['turn_id']}/feedback", json=thumb, headers=owner.headers
    )
    assert judged.status_code == 200, judged.text
    for chat in sessions:
        response = await ask(client, owner, chat, "hello there")
        assert response.status_code == 200, response.text
        footprint.turn_ids.append(response.json()["turn_id"])
    # A streamed turn (its events buffered in Redis) and one with an Idempotency-Key (its
    # stored answer in Redis): the "every Redis key" checks cover both kinds of key.
    body = {"session_id": str(sessions[0].id), "message": "stream it"}
    streamed, events, _ = await stream_chat(client, owner.headers, body)
    assert streamed.status_code == 200 and events[-1].name == "done", events
    footprint.turn_ids.append(streamed.headers["x-turn-id"])
    body = {"session_id": str(sessions[1].id), "message": "only once"}
    once = {**owner.headers, "Idempotency-Key": f"footprint-{user.id}"}
    idempotent = await client.post("/chat", json=body, headers=once)
    assert idempotent.status_code == 200, idempotent.text
    footprint.turn_ids.append(idempotent.json()["turn_id"])
    # A failed login: the throttle counts it under the e-mail.
    failed = await client.post("/auth/token", json={"email": user.email, "password": "guess"})
    assert failed.status_code == 401
    key = await client.post("/admin/api-keys", json={"name": "ci"}, headers=owner.headers)
    assert key.status_code in (201, 403)  # members cannot create keys; admins can
    await wait_for_checkpoints(settings, [str(s.id) for s in sessions])
    return footprint


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


async def tables_naming(settings: Settings, ids: set[str]) -> dict[str, int]:
    """Every table of the schema (from information_schema) with rows naming one of `ids`,
    and how many: each row as text, and each bytea column's bytes (checkpoint blobs)."""
    pattern = "|".join(sorted(ids))
    found: dict[str, int] = {}
    async with owner_connection(settings) as probe:
        tables = (
            await probe.execute(
                text(
                    "SELECT table_name FROM information_schema.tables "
                    "WHERE table_schema = 'public' AND table_type = 'BASE TABLE'"
                )
            )
        ).scalars()
        for table in list(tables):
            hits = await probe.scalar(
                text(f'SELECT count(*) FROM "{table}" x WHERE x::text ~ :p'), {"p": pattern}
            )
            binary = (
                await probe.execute(
                    text(
                        "SELECT column_name FROM information_schema.columns WHERE "
                        "table_schema = 'public' AND table_name = :t AND data_type = 'bytea'"
                    ),
                    {"t": table},
                )
            ).scalars()
            for column in list(binary):
                for one in ids:
                    hits += await probe.scalar(
                        text(
                            f'SELECT count(*) FROM "{table}" '
                            f"WHERE position(convert_to(:id, 'UTF8') in \"{column}\") > 0"
                        ),
                        {"id": one},
                    )
            if hits:
                found[table] = hits
    return found


async def redis_keys_naming(app: FastAPI, ids: set[str], email: str = "") -> list[str]:
    """Keys (anywhere in this Redis) whose name or string value names one of `ids` (or
    holds `email`)."""
    client = app.state.resources.redis.client
    naming: list[str] = []
    async for raw in client.scan_iter(count=1000):
        name = raw.decode()
        value = (
            (await client.get(raw) or b"").decode() if await client.type(raw) == b"string" else ""
        )
        if (
            ids & set(_UUID.findall(name))
            or ids & set(_UUID.findall(value))
            or (email and (email.lower() in name.lower() or email.lower() in value.lower()))
        ):
            naming.append(name)
    return naming
