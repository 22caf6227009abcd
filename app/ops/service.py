"""Readiness: whether PostgreSQL answers and is migrated to head, whether its vectors are the
model this process embeds with, and whether Redis answers.

"Busy" is not "down" (docs/adr/0046, as docs/adr/0015 for Redis): when no pooled connection
is free in time, or the checks' statements wait (locks, load), the database is asked on a new
connection outside the pool. If that connection opens, PostgreSQL answers: it is `busy`, and
the instance stays ready (status `degraded`). Only a database no new connection reaches is
`down`.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TypedDict

from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession

from app.core.db import ping, unpooled_engine
from app.core.migrate import current_revision, head_revision
from app.core.redis import NO_EVICTION, RedisHandle
from app.embeddings.repository import recorded_model

CHECK_TIMEOUT_SECONDS = 2.0
"""The longest the checks' statements, or opening a new connection, may take."""
POOL_WAIT_SECONDS = 1.0
"""The longest readiness waits for a pooled connection before it opens one of its own."""
_TOO_MANY_CONNECTIONS = "53300"  # the server answered: it has no connection slot left

Check = dict[str, str | None]
"""One check: its `status`, and what it found (a revision, a model, the error's type...)."""
Checks = dict[str, Check]


class Readiness(TypedDict):
    """The readiness report: the overall `status` and each check."""

    status: str
    checks: Checks


async def readiness(
    engine: AsyncEngine, redis: RedisHandle, embedder: str | None = None
) -> tuple[Readiness, bool]:
    """The report (`status`, `checks`) and whether the process is ready.

    Redis being down degrades the service (no cache, no resume) without stopping chat, so it
    makes the status `degraded` rather than failing readiness; so does a Redis whose
    `maxmemory-policy` may evict keys (redis `evicting`, ADR 0069); so does a busy PostgreSQL (an
    exhausted pool, statements waiting on locks). Stored vectors of another model than
    `embedder` (the process started while PostgreSQL was down and could not read the model
    on record, or `threadline reindex` switched models since) fail readiness: the process
    must restart to search and ingest in the database's space.
    """
    checks, ready = await _database(engine, embedder)
    redis_up = await redis.ping()
    policy = await redis.eviction_policy() if redis_up else None
    evicting = policy not in (None, NO_EVICTION)
    checks["redis"] = {
        "status": "evicting" if evicting else ("ok" if redis_up else "down"),
        "mode": "in-process" if redis.in_process else "server",
        "maxmemory_policy": policy,
    }
    healthy = redis_up and not evicting and checks["postgres"]["status"] == "ok"
    status = "ok" if ready and healthy else ("degraded" if ready else "unavailable")
    return Readiness(status=status, checks=checks), ready


async def _database(engine: AsyncEngine, embedder: str | None) -> tuple[Checks, bool]:
    """The `postgres`, `migrations` and `embeddings` checks, through the pool if it has a
    connection to give in time, else on a new connection; and whether they allow readiness."""
    async with contextlib.AsyncExitStack() as stack:
        try:
            async with asyncio.timeout(POOL_WAIT_SECONDS):
                connection = await stack.enter_async_context(engine.connect())
        except (TimeoutError, PoolTimeout):  # none free in time
            return await _unpooled(engine, embedder, waited="pool_exhausted")
        except Exception:  # a connection the pool could not open: ask the database itself
            return await _unpooled(engine, embedder, waited=None)
        try:
            async with asyncio.timeout(CHECK_TIMEOUT_SECONDS):
                checks, ready = await _schema(connection, embedder)
            return {"postgres": {"status": "ok"}, **checks}, ready
        except TimeoutError:  # the statements wait (a lock, load)
            waited: str | None = "statements_waiting"
        except Exception:  # a dead socket (a restart): ask on a new connection
            waited = None
    return await _unpooled(engine, embedder, waited=waited)


async def _unpooled(
    engine: AsyncEngine, embedder: str | None, *, waited: str | None
) -> tuple[Checks, bool]:
    """The checks on a connection of their own. `down` if it cannot be opened; else `busy`
    when the first attempt was kept `waited` (`ok` when it failed otherwise), with the schema
    checks if they finish in time (not read again when statements were what waited)."""
    probe = unpooled_engine(engine, connect_timeout=CHECK_TIMEOUT_SECONDS)
    try:
        async with contextlib.AsyncExitStack() as stack:
            try:
                async with asyncio.timeout(CHECK_TIMEOUT_SECONDS):
                    connection = await stack.enter_async_context(probe.connect())
            except Exception as exc:
                if _sqlstate(exc) == _TOO_MANY_CONNECTIONS:  # answered, with no slot left
                    return _unknown({"status": "busy", "reason": "no_connection_slot"}), True
                return _unknown({"status": "down", "error": type(exc).__name__}), False
            # It answered the connection: if a statement does not finish, that is what waits.
            with contextlib.suppress(Exception):
                async with asyncio.timeout(CHECK_TIMEOUT_SECONDS):
                    if waited != "statements_waiting":
                        checks, ready = await _schema(connection, embedder)
                        postgres: Check = {"status": "ok"} if waited is None else _busy(waited)
                        return {"postgres": postgres, **checks}, ready
                    await ping(connection)
            return _unknown(_busy("statements_waiting")), True
    finally:
        await probe.dispose()


async def _schema(connection: AsyncConnection, embedder: str | None) -> tuple[Checks, bool]:
    """The `migrations` and `embeddings` checks read on `connection`, and whether they pass."""
    revision = await current_revision(connection)
    head = head_revision()
    at_head = revision == head
    # Behind head the table may not be there yet: the schema check says enough.
    stored = await recorded_model(AsyncSession(bind=connection)) if at_head else None
    same_space = embedder is None or stored in (None, embedder)
    checks: Checks = {
        "migrations": {"status": "ok" if at_head else "behind", "current": revision, "head": head},
        "embeddings": {
            "status": "ok" if same_space else "other_model",
            "stored": stored,
            "process": embedder,
        },
    }
    return checks, at_head and same_space


def _busy(reason: str) -> Check:
    return {"status": "busy", "reason": reason}


def _unknown(postgres: Check) -> Checks:
    return {
        "postgres": postgres,
        "migrations": {"status": "unknown"},
        "embeddings": {"status": "unknown"},
    }


def _sqlstate(exc: BaseException) -> str:
    """The SQLSTATE of `exc` or of what caused it, if any."""
    current: BaseException | None = exc
    for _ in range(5):
        if current is None:
            break
        state = getattr(current, "sqlstate", None) or getattr(current, "pgcode", None)
        if state:
            return str(state)
        orig = getattr(current, "orig", None)
        current = orig if isinstance(orig, BaseException) else current.__cause__
    return ""
