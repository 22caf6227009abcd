"""Typed async factories: each creates one row with sensible defaults, overridable by keyword."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import NamedTuple

import httpx
from argon2 import PasswordHasher
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.db import scope_to_tenant
from app.models import ChatSession, QueryHistory, Tenant, User
from app.tenants.repository import insert_tenant

DEFAULT_PASSWORD = "correct horse battery"


class Chatter(NamedTuple):
    """A user of a new tenant, with one session, logged in."""

    tenant: Tenant
    user: User
    chat: ChatSession
    owner: LoggedIn


@dataclass
class LoggedIn:
    user: User
    headers: dict[str, str]
    refresh_token: str


async def make_tenant(db: AsyncSession, *, name: str | None = None) -> Tenant:
    tenant = Tenant(id=uuid.uuid4(), name=name or f"tenant-{uuid.uuid4().hex[:8]}", settings={})
    await insert_tenant(db, tenant)
    await db.commit()
    return tenant


_HASH_CACHE: dict[str, str] = {}
# The factories' users get argon2id hashes at the smallest cost: the product verifies them as
# it verifies any (the parameters travel in the hash), in about a millisecond instead of
# ~150 ms, and the suite signs in well over a thousand times. Hashes the product makes itself
# (an admin's new user, sign-up by SSO, a reset) keep its real cost, and are tested so.
_CHEAP_HASHER = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)


async def make_user(
    db: AsyncSession,
    tenant: Tenant,
    *,
    email: str | None = None,
    password: str = DEFAULT_PASSWORD,
    role: str = "member",
) -> User:
    if password not in _HASH_CACHE:
        _HASH_CACHE[password] = _CHEAP_HASHER.hash(password)
    await scope_to_tenant(db, tenant.id)
    user = User(
        tenant_id=tenant.id,
        email=email or f"user-{uuid.uuid4().hex[:8]}@example.com",
        password_hash=_HASH_CACHE[password],
        role=role,
    )
    db.add(user)
    await db.commit()
    return user


async def make_session(
    db: AsyncSession, user: User, *, title: str = "A conversation"
) -> ChatSession:
    await scope_to_tenant(db, user.tenant_id)
    chat = ChatSession(tenant_id=user.tenant_id, user_id=user.id, title=title)
    db.add(chat)
    await db.commit()
    return chat


async def make_turn(
    db: AsyncSession,
    chat: ChatSession,
    *,
    user_query: str = "What is Threadline?",
    answer: str = "A chat platform.",
    status: str = "complete",
) -> QueryHistory:
    await scope_to_tenant(db, chat.tenant_id)
    turn = QueryHistory(
        tenant_id=chat.tenant_id,
        session_id=chat.id,
        user_id=chat.user_id,
        user_query=user_query,
        answer=answer,
        status=status,
        query_composition="chat",
    )
    db.add(turn)
    await db.commit()
    return turn


async def login(
    client: httpx.AsyncClient, user: User, password: str = DEFAULT_PASSWORD
) -> LoggedIn:
    response = await client.post("/auth/token", json={"email": user.email, "password": password})
    assert response.status_code == 200, response.text
    body = response.json()
    return LoggedIn(
        user=user,
        headers={"Authorization": f"Bearer {body['access_token']}"},
        refresh_token=body["refresh_token"],
    )


async def make_chatter(client: httpx.AsyncClient, db: AsyncSession) -> Chatter:
    tenant = await make_tenant(db)
    user = await make_user(db, tenant)
    chat = await make_session(db, user)
    return Chatter(tenant, user, chat, await login(client, user))


async def make_knowledge_base(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, documents: list[tuple[str, str]]
) -> uuid.UUID:
    """A new tenant whose admin added these `(title, text)` documents, ingested; `db` is left
    scoped to the tenant. Returns the tenant's id."""
    tenant = await make_tenant(db)
    admin = await login(client, await make_user(db, tenant, role="admin"))
    for title, text in documents:
        accepted = await client.post(
            "/kb/documents", json={"title": title, "text": text}, headers=admin.headers
        )
        assert accepted.status_code == 202, accepted.text
    await app.state.resources.jobs.drain()
    await scope_to_tenant(db, tenant.id)
    return tenant.id
