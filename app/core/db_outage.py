"""Telling "PostgreSQL cannot be reached right now" apart from every other database error,
and retrying a write through such an outage for a bounded time.

An outage shows up in many shapes: a refused or reset connection, or a missing Unix socket
(OSError), a closed connection under psycopg (its OperationalError), a server starting or
shutting down (SQLSTATE 57P0x), a backend terminated under a pooled connection (asyncpg
ConnectionDoesNotExistError, SQLSTATE class 08), a pool with no connection to give
(sqlalchemy TimeoutError). SQLAlchemy wraps most of them; the cause chain is searched.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import random
import socket
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout

logger = logging.getLogger(__name__)

T = TypeVar("T")

# 08: connection exception; 57P01-3: admin/crash shutdown, cannot connect now; 53300: too many
# connections.
_UNAVAILABLE_STATES = ("57P01", "57P02", "57P03", "53300")
# ENOENT: a server reached through its Unix socket (the embedded default) removes the socket
# file while it is stopped, so connecting fails with "no such file" rather than "refused".
_NETWORK_ERRNOS = frozenset(
    {
        errno.ECONNREFUSED,
        errno.ECONNRESET,
        errno.EHOSTUNREACH,
        errno.ENETUNREACH,
        errno.ETIMEDOUT,
        errno.ENOENT,
        errno.EPIPE,
    }
)
_FIRST_DELAY, _MAX_DELAY = 0.1, 2.0


def is_db_unavailable(exc: BaseException) -> bool:
    """True when `exc` (or what caused it) means the database cannot be reached now."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, PoolTimeout | ConnectionError | socket.gaierror):
            return True
        if isinstance(current, OSError) and current.errno in _NETWORK_ERRNOS:
            return True
        if isinstance(current, DBAPIError) and current.connection_invalidated:
            return True
        sqlstate = str(getattr(current, "sqlstate", "") or "")
        if sqlstate.startswith("08") or sqlstate in _UNAVAILABLE_STATES:
            return True
        name = type(current).__name__
        if name in ("ConnectionDoesNotExistError", "CannotConnectNowError"):
            return True
        # psycopg (the checkpointer's driver) raises OperationalError, without a SQLSTATE,
        # for a connection the server closed or could not open.
        if name == "OperationalError" and type(current).__module__.startswith("psycopg"):
            return True
        orig = getattr(current, "orig", None)
        current = orig if isinstance(orig, BaseException) else current.__cause__
    return False


async def retry_through_outage(
    operation: Callable[[], Awaitable[T]], *, budget_seconds: float, what: str
) -> T:
    """Run `operation`; while it fails because the database is unreachable, run it again
    with jittered exponential backoff until `budget_seconds` have passed. Any other error,
    or the last outage error, is raised. The operation must be safe to repeat (one
    transaction that either committed or did not)."""
    deadline = time.monotonic() + budget_seconds
    delay = _FIRST_DELAY
    attempt = 0
    while True:
        attempt += 1
        try:
            return await operation()
        except Exception as exc:
            left = deadline - time.monotonic()
            if not is_db_unavailable(exc) or left <= 0:
                raise
            logger.warning(
                "database unavailable: retrying", extra={"what": what, "attempt": attempt}
            )
            await asyncio.sleep(min(delay * (0.5 + random.random()), left))  # noqa: S311
            delay = min(delay * 2, _MAX_DELAY)
