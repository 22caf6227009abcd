"""`RedisHandle.reachable()` under load, on a private redis-server: a probe that the event loop
is too busy to run on time does not make a Redis that answers "down" (idempotency is then
refused with 503, never skipped); a Redis that is stopped or does not answer still is down;
concurrent probes share one connection."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from app.config import Settings
from app.conversation.durability.idempotency import IdempotencyStore, IdempotencyUnavailable
from app.core.redis import RedisHandle, build_redis
from tests.private_redis import PrivateRedis, _command, private_redis

LAG_SECONDS = 1.5
"""How long the busy loop runs without yielding: past the old probe's 1 s socket timeouts."""


@pytest.fixture
def server() -> Iterator[PrivateRedis]:
    with private_redis() as running:
        yield running


def _handle(server: PrivateRedis, **overrides: object) -> RedisHandle:
    values: dict[str, object] = {
        "redis_url": server.url,
        "redis_prefix": f"tl-test-{uuid.uuid4().hex[:8]}:",
        **overrides,
    }
    return build_redis(Settings(**values))  # type: ignore[arg-type]


@contextlib.asynccontextmanager
async def _busy_event_loop() -> AsyncIterator[None]:
    """The loop as under heavy load: CPU-bound work that yields only every `LAG_SECONDS`."""
    stop = False

    async def hog() -> None:
        while not stop:
            time.sleep(LAG_SECONDS)  # noqa: ASYNC251 - blocking the loop is the point
            await asyncio.sleep(0)  # one turn of the loop for everything else

    task = asyncio.create_task(hog())
    await asyncio.sleep(0)
    try:
        yield
    finally:
        stop = True
        await task


def _connections_received(server: PrivateRedis) -> int:
    stats = _command(server.port, "INFO", "stats").decode()
    (line,) = [x for x in stats.splitlines() if x.startswith("total_connections_received:")]
    return int(line.split(":")[1])


async def test_a_probe_the_busy_event_loop_runs_late_still_finds_redis(
    server: PrivateRedis,
) -> None:
    redis = _handle(server)
    try:
        async with _busy_event_loop():
            assert await redis.reachable()
    finally:
        await redis.close()


async def test_a_claim_that_fails_under_load_is_refused_not_run_without_idempotency(
    server: PrivateRedis, caplog: pytest.LogCaptureFixture
) -> None:
    redis = _handle(server, redis_max_connections=2, redis_pool_timeout_seconds=0.2)
    store = IdempotencyStore(redis, ttl_seconds=3600, running_ttl_seconds=120)
    pool = redis.client.connection_pool
    held = [await pool.get_connection() for _ in range(2)]  # type: ignore[no-untyped-call]

    async def exists(_turn: uuid.UUID) -> bool:
        return True

    try:
        with caplog.at_level(logging.WARNING, logger="app.conversation.durability.idempotency"):
            async with _busy_event_loop():
                with pytest.raises(IdempotencyUnavailable):
                    await store.claim(
                        uuid.uuid4(), uuid.uuid4(), "key", "print", uuid.uuid4(), exists
                    )
        assert "running without idempotency" not in caplog.text
    finally:
        for connection in held:
            await pool.release(connection)
        await redis.close()


async def test_a_stopped_redis_is_down_at_once(server: PrivateRedis) -> None:
    redis = _handle(server)
    try:
        server.stop()
        started = time.monotonic()
        assert not await redis.reachable()
        assert time.monotonic() - started < 1.0
    finally:
        await redis.close()


async def test_a_redis_that_accepts_but_never_answers_is_down_within_the_budget(
    server: PrivateRedis,
) -> None:
    redis = _handle(server)
    assert server.process is not None
    os.kill(server.process.pid, signal.SIGSTOP)  # the kernel still accepts its connections
    try:
        started = time.monotonic()
        assert not await redis.reachable()
        assert time.monotonic() - started < 5.0
    finally:
        os.kill(server.process.pid, signal.SIGCONT)
        await redis.close()


async def test_concurrent_probes_share_one_connection(server: PrivateRedis) -> None:
    redis = _handle(server)
    try:
        before = _connections_received(server)
        assert all(await asyncio.gather(*(redis.reachable() for _ in range(50))))
        # The count includes the INFO connection asking.
        assert _connections_received(server) - before <= 3
    finally:
        await redis.close()
