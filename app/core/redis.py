"""The Redis client, built in lifespan. Without `REDIS_URL`, an in-process stand-in.

The stand-in (fakeredis) speaks the same protocol subset inside the process, so the embedded
default needs no Redis server; state is then per process, which is fine for one `serve`.

Real Redis (docs/adr/0015):
- a blocking pool of `THREADLINE_REDIS_MAX_CONNECTIONS`: past that, a caller waits up to
  `THREADLINE_REDIS_POOL_TIMEOUT_SECONDS` for a free connection instead of failing at once;
- a connection idle for a few seconds is PINGed before use, and a command that meets a dead
  socket (Redis restarted) or a timeout is sent again on a fresh connection, with a short
  jittered backoff: the first operation after a restart works;
- short socket timeouts, so a Redis that is really down is noticed quickly. `reachable()`
  tells "down" (no new connection can be opened) from "answers, but this call failed"; only
  the first is a degradation callers may absorb.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff, NoBackoff
from redis.exceptions import ConnectionError

from app.config import Settings

logger = logging.getLogger(__name__)

SOCKET_TIMEOUT_SECONDS = 1.0
# A pooled connection idle longer than this is PINGed before its next command: a socket left
# dead by a restart is replaced before a non-idempotent command (INCR, XADD) is sent on it.
HEALTH_CHECK_SECONDS = 5
# Retries of one command on a connection or timeout error (each on a fresh connection), after
# 0-50, 0-100, 0-200 ms: about what a restarting Redis needs to accept connections again.
RETRIES = 3
_BACKOFF = ExponentialWithJitterBackoff(cap=0.5, base=0.025)


@dataclass
class RedisHandle:
    """The process's Redis client, with the key prefix every key is built with."""

    client: Redis
    in_process: bool
    prefix: str

    def key(self, *parts: object) -> str:
        """A key under this deployment's prefix, its parts joined by `:`."""
        return self.prefix + ":".join(str(part) for part in parts)

    async def ping(self) -> bool:
        """Whether Redis answers (for `/readyz`): through the pool, else on a new connection
        (a pool that is busy or still holds dead sockets does not make Redis "down")."""
        try:
            return bool(await self.client.ping())
        except Exception:  # any transport failure: ask Redis itself
            return await self.reachable()

    async def reachable(self) -> bool:
        """Whether a new connection to Redis can be opened and answers PING.

        Outside the pool, with no retries: this is how a caller tells a Redis that is down
        (the documented degradation) from one that answers while the pool is exhausted or a
        command failed on its way."""
        if self.in_process:
            return True
        pool = self.client.connection_pool
        kwargs: dict[str, Any] = {
            **pool.connection_kwargs,
            "retry": Retry(NoBackoff(), 0),
            "health_check_interval": 0,
        }
        connection = pool.connection_class(**kwargs)
        try:
            async with asyncio.timeout(2 * SOCKET_TIMEOUT_SECONDS):
                await connection.connect()  # type: ignore[no-untyped-call]
                await connection.send_command("PING")
                return bool(await connection.read_response())
        except Exception:
            return False
        finally:
            try:
                await connection.disconnect()
            except Exception:  # already gone
                logger.debug("probe connection did not close cleanly", exc_info=True)

    async def close(self) -> None:
        """Close the client and its pool."""
        await self.client.aclose()

    def dedicated_client(self) -> Redis:
        """A client with one connection of its own, outside the shared pool, for a task that
        blocks in Redis on behalf of many callers (the stream tail's XREAD): its waits must
        never hold a connection the pool's other callers need. In process: the one client."""
        if self.in_process:
            return self.client
        shared = self.client.connection_pool
        pool = BlockingConnectionPool(
            connection_class=shared.connection_class,
            max_connections=1,
            timeout=SOCKET_TIMEOUT_SECONDS,
            **shared.connection_kwargs,
        )
        return Redis.from_pool(pool)


def build_redis(settings: Settings) -> RedisHandle:
    """The Redis handle for the settings: a real pool, or fakeredis without `REDIS_URL`."""
    if settings.redis_url:
        pool = BlockingConnectionPool.from_url(
            settings.redis_url,
            max_connections=settings.redis_max_connections,
            timeout=settings.redis_pool_timeout_seconds,
            socket_connect_timeout=SOCKET_TIMEOUT_SECONDS,
            socket_timeout=SOCKET_TIMEOUT_SECONDS,
            health_check_interval=HEALTH_CHECK_SECONDS,
            retry=Retry(_BACKOFF, RETRIES),
            # Connection errors only: a timed-out command may have run, and sending it again
            # would count a limiter INCR or a quota charge twice.
            retry_on_error=[ConnectionError],
        )
        client = Redis.from_pool(pool)
        return RedisHandle(client=client, in_process=False, prefix=settings.redis_prefix)
    import fakeredis

    return RedisHandle(
        client=fakeredis.FakeAsyncRedis(), in_process=True, prefix=settings.redis_prefix
    )
