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
  the first is a degradation callers may absorb. It probes in a thread, on the wall clock, so
  a busy event loop does not make Redis look down.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from redis import Redis as SyncRedis
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff, NoBackoff
from redis.exceptions import ConnectionError
from redis.retry import Retry as SyncRetry

from app.config import Settings

logger = logging.getLogger(__name__)

SOCKET_TIMEOUT_SECONDS = 1.0
# A pooled connection idle longer than this is PINGed before its next command: a socket left
# dead by a restart is replaced before a non-idempotent command (INCR, XADD) is sent on it.
HEALTH_CHECK_SECONDS = 5
# Retries of one command on a connection or timeout error (each on a fresh connection), after
# 0-50, 0-100, 0-200 ms: about what a restarting Redis needs to accept connections again.
RETRIES = 3
# `reachable()`: the longest opening its connection, then the PING's answer, may take.
PROBE_TIMEOUT_SECONDS = 2.0
_BACKOFF = ExponentialWithJitterBackoff(cap=0.5, base=0.025)
NO_EVICTION = "noeviction"
"""The only `maxmemory-policy` under which Redis never drops a key to make room."""


@dataclass
class RedisHandle:
    """The process's Redis client, with the key prefix every key is built with."""

    client: Redis
    in_process: bool
    prefix: str
    _url: str = field(default="", repr=False)  # may hold a password
    """The server's URL, for `reachable()`'s own connection."""
    _prober: ThreadPoolExecutor | None = field(default=None, init=False, repr=False)
    _probing: asyncio.Future[bool] | None = field(default=None, init=False, repr=False)

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

    async def eviction_policy(self) -> str | None:
        """Redis's `maxmemory-policy`, or None when it cannot be read (Redis down, or CONFIG
        not allowed, as on some managed services). Any policy but `noeviction` may drop keys
        under memory pressure: the idempotency records (recovered from the turns' rows, ADR
        0069), stream buffers (resume then 404s), rate-limit counters, caches."""
        if self.in_process:
            return NO_EVICTION
        try:
            reply = await self.client.config_get("maxmemory-policy")
        except Exception:  # down, or CONFIG renamed or denied
            return None
        policy = reply.get("maxmemory-policy")
        return str(policy) if policy else None

    async def reachable(self) -> bool:
        """Whether a new connection to Redis can be opened and answers PING.

        Outside the pool, with no retries: this is how a caller tells a Redis that is down
        (the documented degradation) from one that answers while the pool is exhausted or a
        command failed on its way.

        The probe runs in a thread of its own, on blocking sockets whose timeouts the kernel
        keeps (docs/adr/0046): an event loop too busy to run a callback on time (the load
        under which pooled operations fail in the first place) must not count against Redis,
        as a timeout measured by the loop did. Callers that ask while a probe is under way
        share its answer, so a burst of failures opens one connection, not one each."""
        if self.in_process:
            return True
        loop = asyncio.get_running_loop()
        probing = self._probing
        if probing is None or probing.done() or probing.get_loop() is not loop:
            if self._prober is None:
                self._prober = ThreadPoolExecutor(1, thread_name_prefix="redis-probe")
            probing = loop.run_in_executor(self._prober, _probe, self._url)
            self._probing = probing
        return await asyncio.shield(probing)

    async def close(self) -> None:
        """Close the client and its pool."""
        await self.client.aclose()
        if self._prober is not None:
            self._prober.shutdown(wait=False)

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


def _probe(url: str) -> bool:
    """PING on a new blocking connection to `url`, each step within `PROBE_TIMEOUT_SECONDS`
    of wall-clock time (kept by the kernel, not by an event loop), no retries."""
    client: SyncRedis | None = None
    try:
        client = SyncRedis.from_url(
            url,
            socket_connect_timeout=PROBE_TIMEOUT_SECONDS,
            socket_timeout=PROBE_TIMEOUT_SECONDS,
            retry=SyncRetry(NoBackoff(), 0),
            health_check_interval=0,
            single_connection_client=True,  # connects here
        )
        return bool(client.ping())
    except Exception:  # refused, unreachable, no answer in time, an error reply
        return False
    finally:
        if client is not None:
            try:
                client.close()
            except Exception:  # already gone
                logger.debug("probe connection did not close cleanly", exc_info=True)


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
        return RedisHandle(
            client=client, in_process=False, prefix=settings.redis_prefix, _url=settings.redis_url
        )
    import fakeredis

    return RedisHandle(
        client=fakeredis.FakeAsyncRedis(), in_process=True, prefix=settings.redis_prefix
    )


async def warn_if_evicting(redis: RedisHandle) -> str | None:
    """Log a warning at start-up when Redis may evict keys (docs/operations.md); its policy."""
    policy = await redis.eviction_policy()
    if policy is not None and policy != NO_EVICTION:
        logger.warning(
            "Redis maxmemory-policy is %s: it may evict keys (Idempotency-Keys fall back on the "
            "database, resumable streams and rate limits are lost); set noeviction",
            policy,
        )
    return policy
