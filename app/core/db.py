"""SQLAlchemy foundations: declarative base, engines, and the per-transaction tenant scope.

Row-level security reads the tenant from the transaction-local setting `threadline.tenant_id`.
Every transaction a `Session` begins sets it (or clears it) first, from its `info`, so a
pooled connection can never carry one request's tenant into another's transaction.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, MetaData, event, func, text
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.engine import URL, Connection
from sqlalchemy.ext.asyncio import (
    AsyncConnection,
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, SessionTransaction, mapped_column
from sqlalchemy.pool import NullPool

NAMING_CONVENTION: Mapping[str, str] = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# Transaction-local settings read by the row-level-security policies (see migrations and
# docs/adr/0002). `TENANT` scopes every tenant-owned table; the others open one narrow,
# read-only door each, for the few look-ups that happen before the tenant is known.
TENANT = "threadline.tenant_id"
LOGIN_EMAIL = "threadline.login_email"
API_KEY_HASH = "threadline.api_key_hash"
TENANT_NAME = "threadline.tenant_name"
COLLECTIONS = "threadline.collections"
"""The knowledge-base collections the caller may see now, as a PostgreSQL array literal;
unset: no narrowing below the tenant (workers, maintenance). Migration 0031, ADR 0078."""
SCOPE_SETTINGS = (TENANT, LOGIN_EMAIL, API_KEY_HASH, TENANT_NAME, COLLECTIONS)

_SET_SCOPE = text(
    "SELECT "
    + ", ".join(f"set_config('{name}', :s{i}, true)" for i, name in enumerate(SCOPE_SETTINGS))
)
_PING = text("SELECT 1")


class Base(DeclarativeBase):
    """Declarative base of every ORM model, with the constraint naming convention."""

    metadata = MetaData(naming_convention=dict(NAMING_CONVENTION))


def new_id() -> uuid.UUID:
    """A fresh random primary key."""
    return uuid.uuid4()


class TenantOwned:
    """Mixin for tenant-owned tables: `(tenant_id, id)` is the primary key.

    Carrying the tenant in every key lets child tables reference parents by
    `(tenant_id, parent_id)` (the database refuses a cross-tenant link) and lets the schema be
    distributed by tenant (Citus) later without changing keys.
    """

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, index=False)
    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=new_id)


class Timestamped:
    # clock_timestamp(), not now(): rows written in one transaction still get distinct,
    # ordered times, which keyset pagination and history order rely on.
    """Mixin adding `created_at`, set by the database when the row is written."""

    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.clock_timestamp(), nullable=False
    )


def create_engine(url: URL, *, pool_size: int = 10, max_overflow: int = 10) -> AsyncEngine:
    # No pre-ping: it would cost a round trip on every checkout (a turn checks out several
    # times). A connection broken by a server restart fails its next statement, SQLAlchemy
    # invalidates it, and the request fails once with a clear error; recycling bounds age.
    """An async engine with the pool settings every process uses."""
    return create_async_engine(
        url,
        pool_size=pool_size,
        max_overflow=max_overflow,
        pool_pre_ping=False,
        pool_recycle=1800,
        connect_args={"server_settings": {"application_name": "threadline"}},
    )


def unpooled_engine(engine: AsyncEngine, *, connect_timeout: float) -> AsyncEngine:
    """An engine on `engine`'s database that opens a new connection for each use, within
    `connect_timeout` seconds, and keeps none: to ask the database itself when `engine`'s pool
    has no connection to give (readiness, docs/adr/0046). Dispose of it after use."""
    return create_async_engine(
        engine.url,
        poolclass=NullPool,
        connect_args={
            "timeout": connect_timeout,
            "server_settings": {"application_name": "threadline-probe"},
        },
    )


async def ping(connection: AsyncConnection) -> None:
    """One round trip that touches no table (waits on no lock): the server answers."""
    await connection.execute(_PING)


def create_sessionmaker(bind: AsyncEngine | Any) -> async_sessionmaker[AsyncSession]:
    """The factory of database sessions: no expiry on commit, no autoflush."""
    return async_sessionmaker(bind=bind, expire_on_commit=False, autoflush=False)


def scope_values(info: Mapping[str, Any]) -> dict[str, str]:
    """Bind parameters that set every RLS setting from a session's `info`."""
    return {f"s{i}": str(info.get(name) or "") for i, name in enumerate(SCOPE_SETTINGS)}


@event.listens_for(Session, "after_begin")
def _apply_scope(db: Session, transaction: SessionTransaction, connection: Connection) -> None:
    """Set (or clear) every RLS setting at the start of each transaction."""
    connection.execute(_SET_SCOPE, scope_values(db.info))


async def set_scope(db: AsyncSession, values: Mapping[str, object | None]) -> None:
    """Change the RLS scope of `db` (keys from `SCOPE_SETTINGS`), now and for its later
    transactions."""
    unknown = set(values) - set(SCOPE_SETTINGS)
    if unknown:
        raise ValueError(f"unknown scope settings: {sorted(unknown)}")
    db.info.update(values)
    if db.in_transaction():
        await db.execute(_SET_SCOPE, scope_values(db.info))


async def scope_to_tenant(db: AsyncSession, tenant_id: uuid.UUID | None) -> None:
    """Scope the database session `db` (and its later transactions) to one tenant, or to none."""
    await set_scope(db, {TENANT: tenant_id})


def collections_literal(collection_ids: Sequence[uuid.UUID]) -> str:
    """`collection_ids` as the array literal `threadline.collections` holds."""
    return "{" + ",".join(str(uuid.UUID(str(c))) for c in collection_ids) + "}"


async def restrict_to_collections(
    db: AsyncSession, collection_ids: Sequence[uuid.UUID] | None
) -> None:
    """Narrow `db` (now and for its later transactions) to these collections' documents and
    chunks; None lifts the narrowing (the tenant's row-level security still holds)."""
    value = None if collection_ids is None else collections_literal(collection_ids)
    await set_scope(db, {COLLECTIONS: value})


def visible_collections(db: AsyncSession) -> list[uuid.UUID] | None:
    """The collections `db` is narrowed to (None: not narrowed), for the application's own
    filter beside the policy's."""
    value = db.info.get(COLLECTIONS)
    if not value:
        return None
    inner = str(value).strip("{}")
    return [uuid.UUID(part) for part in inner.split(",") if part]


@asynccontextmanager
async def lookup_scope(db: AsyncSession, name: str, value: str) -> AsyncIterator[None]:
    """Open one of the narrow RLS doors for the statements inside the block, then close it."""
    await set_scope(db, {name: value})
    try:
        yield
    except BaseException:
        db.info.pop(name, None)  # the failing transaction is not used again
        raise
    await set_scope(db, {name: None})
