"""The protocol tests' world: one `threadline serve` process (uvicorn on a free port, the test
database and Redis, the offline extractive model), three tenants with API keys and a small
knowledge base each, and row counts read as the database owner (past row-level security)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

from app.config import Settings
from app.core.database_urls import resolve_database_urls
from app.models import Tenant
from app.tenants.repository import insert_tenant
from tests.factories import DEFAULT_PASSWORD, make_user
from tests.server_process import ServerProcess, server_processes

DOCUMENTS = {
    "a": {
        "title": "Refund policy",
        "text": "Refunds are paid within 14 days of a written request. The refund policy covers "
        "annual plans and monthly plans alike. Shipping costs are never refunded.",
    },
    "b": {
        "title": "Refund rules of the other tenant",
        "text": "Refunds at this other company take ninety days and need a notarised letter. "
        "Zebra-striped parcels are refunded twice.",
    },
}


@dataclass
class Account:
    """A tenant's admin, with an admin API key and a member API key."""

    tenant_id: uuid.UUID
    user_id: uuid.UUID
    email: str
    admin_key: str
    member_key: str
    document_id: str | None = None


@dataclass
class World:
    url: str
    settings: Settings
    a: Account
    b: Account
    limited: Account
    """A tenant whose users may send one chat request a minute."""

    async def count(self, sql: str, **params: object) -> int:
        """One number, read as the database owner (row-level security does not apply)."""
        engine = create_async_engine(resolve_database_urls(self.settings).owner)
        try:
            async with engine.connect() as connection:
                return int((await connection.execute(text(sql), params)).scalar_one())
        finally:
            await engine.dispose()

    async def turns(self, tenant_id: uuid.UUID) -> int:
        return await self.count(
            "SELECT count(*) FROM query_history WHERE tenant_id = :t", t=tenant_id
        )

    async def sessions(self, tenant_id: uuid.UUID) -> int:
        return await self.count(
            "SELECT count(*) FROM chat_sessions WHERE tenant_id = :t", t=tenant_id
        )


PROTOCOL_ENV = {
    "THREADLINE_INGEST_WORKERS": "0",
    "THREADLINE_INGESTION_RECOVERY_SECONDS": "600",
    "THREADLINE_PII_ANONYMIZE": "false",
}


def protocol_server(settings: Settings) -> Iterator[ServerProcess]:
    """The API as a real server process, with its own Redis prefix."""
    own = settings.model_copy(update={"redis_prefix": f"tl-proto-{uuid.uuid4().hex[:8]}:"})
    with server_processes(own, 1, **PROTOCOL_ENV) as (server,):
        yield server


async def _account(
    db: AsyncSession, client: httpx.AsyncClient, *, limits: dict[str, int] | None = None
) -> Account:
    tenant = Tenant(
        id=uuid.uuid4(),
        name=f"tenant-{uuid.uuid4().hex[:8]}",
        settings={"limits": limits} if limits else {},
    )
    await insert_tenant(db, tenant)
    await db.commit()
    admin = await make_user(db, tenant, role="admin")
    login = await client.post(
        "/auth/token", json={"email": admin.email, "password": DEFAULT_PASSWORD}
    )
    assert login.status_code == 200, login.text
    headers = {"Authorization": f"Bearer {login.json()['access_token']}"}
    keys = {}
    for role in ("admin", "member"):
        created = await client.post(
            "/admin/api-keys", json={"name": f"{role} key", "role": role}, headers=headers
        )
        assert created.status_code == 201, created.text
        keys[role] = created.json()["key"]
    return Account(tenant.id, admin.id, admin.email, keys["admin"], keys["member"])


async def _add_document(
    client: httpx.AsyncClient, account: Account, document: dict[str, str]
) -> str:
    headers = {"X-API-Key": account.admin_key}
    response = await client.post("/kb/documents", json=document, headers=headers)
    assert response.status_code in (200, 202), response.text
    doc_id = str(response.json()["id"])
    deadline = time.monotonic() + 60
    while (await client.get(f"/kb/documents/{doc_id}", headers=headers)).json()[
        "status"
    ] != "ready":
        assert time.monotonic() < deadline, "the knowledge base did not become ready"
        await asyncio.sleep(0.2)
    return doc_id


async def build_world(settings: Settings, server: ServerProcess) -> World:
    """Three tenants (two with a document each, one rate-limited), their admins and keys."""
    engine = create_async_engine(resolve_database_urls(settings).app)
    async with (
        AsyncSession(engine, expire_on_commit=False) as db,
        httpx.AsyncClient(base_url=server.url, timeout=30) as client,
    ):
        a = await _account(db, client)
        b = await _account(db, client)
        limited = await _account(db, client, limits={"user_per_min": 1})
        a.document_id = await _add_document(client, a, DOCUMENTS["a"])
        b.document_id = await _add_document(client, b, DOCUMENTS["b"])
    await engine.dispose()
    return World(server.url, settings, a, b, limited)
