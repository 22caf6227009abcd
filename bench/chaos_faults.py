"""What the chaos benchmark's issue-31 phases do beside the streams: fill an evicting Redis,
pause an API process past its turns' leases, restart PostgreSQL as after a crash, probe
`/readyz` in bursts, run slow readers, sample the API processes' RSS. Each loop is bounded in
count and in time; everything is on loopback, and each process signalled is one the stack
started (by its PID)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

import httpx
import psutil
import redis.asyncio as aioredis

from bench.chaos_report import Probes, Rss
from bench.chaos_stack import Child, Stack
from bench.slow_reading import Rss as RssSampler
from bench.slow_reading import sample, slow_reader

MIB = 1024 * 1024
FILLER_PREFIX = "chaos-filler:"
FILLER_BYTES = 64 * 1024
FILLER_MAX_KEYS = 3000
"""At most ~190 MiB written over the phase; Redis holds at most its cap of it."""
FILLER_EVERY = 0.02
EVICTION_HEADROOM = 8 * MIB
"""Redis is capped at what it uses when the fault lands plus this."""

PROBE_EVERY = 0.5
PROBE_BURST = 10
PROBE_MAX_ROUNDS = 240
PROBE_TIMEOUT = 5.0

SLOW_RATE = 512
SLOW_RCVBUF = 2048
RSS_SETTLE_SECONDS = 10.0


async def fill_redis(url: str, until: asyncio.Event) -> int:
    """Cap Redis at its present use plus EVICTION_HEADROOM with `allkeys-lru`, then write
    filler keys until `until` (at most FILLER_MAX_KEYS): Redis evicts the least recently used
    keys, the product's among them. Returns the keys Redis evicted meanwhile."""
    client = aioredis.from_url(url)
    try:
        memory = await client.info("memory")
        evicted_before = int((await client.info("stats"))["evicted_keys"])
        cap = int(memory["used_memory"]) + EVICTION_HEADROOM
        await client.config_set("maxmemory", str(cap))
        await client.config_set("maxmemory-policy", "allkeys-lru")
        value = b"x" * FILLER_BYTES
        for i in range(FILLER_MAX_KEYS):
            if until.is_set():
                break
            await client.set(f"{FILLER_PREFIX}{i}", value)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(until.wait(), FILLER_EVERY)
        return int((await client.info("stats"))["evicted_keys"]) - evicted_before
    finally:
        await client.aclose()


async def unfill_redis(url: str) -> None:
    """Redis uncapped and not evicting again, the filler deleted (the product's keys kept)."""
    client = aioredis.from_url(url)
    try:
        await client.config_set("maxmemory", "0")
        await client.config_set("maxmemory-policy", "noeviction")
        keys = [key async for key in client.scan_iter(f"{FILLER_PREFIX}*", count=500)]
        for start in range(0, len(keys), 500):
            await client.unlink(*keys[start : start + 500])
    finally:
        await client.aclose()


def pause(api: Child, seconds: float) -> None:
    """SIGSTOP the process for `seconds`, then SIGCONT (blocking: run in a thread)."""
    api.signal(signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        api.signal(signal.SIGCONT)


def crash_restart_postgres(stack: Stack) -> None:
    """PostgreSQL stopped as by a crash (immediate shutdown), then started at once."""
    assert stack.postgres is not None
    stack.postgres.stop("immediate")
    stack.postgres.start()


async def _probe(client: httpx.AsyncClient, base: str, probes: Probes) -> None:
    probes.sent += 1
    try:
        response = await client.get(f"{base}/readyz", timeout=PROBE_TIMEOUT)
    except httpx.HTTPError as exc:
        probes.answers[type(exc).__name__] += 1
        return
    try:
        body = response.json()
        postgres = str(body["checks"]["postgres"]["status"])
        status = str(body["status"])
    except (ValueError, KeyError, TypeError):
        postgres, status = "?", "?"
    probes.answers[f"{response.status_code} {status}, postgres {postgres}"] += 1
    probes.down += response.status_code == 503 or postgres == "down"
    probes.bad_5xx += response.status_code >= 500 and response.status_code != 503


async def probe_readyz(bases: list[str], until: asyncio.Event) -> Probes:
    """Bursts of PROBE_BURST `/readyz` requests over both processes every PROBE_EVERY s until
    `until` (at most PROBE_MAX_ROUNDS bursts)."""
    probes = Probes()
    async with httpx.AsyncClient() as client:
        for _ in range(PROBE_MAX_ROUNDS):
            if until.is_set():
                break
            burst = (_probe(client, bases[i % len(bases)], probes) for i in range(PROBE_BURST))
            await asyncio.gather(*burst)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(until.wait(), PROBE_EVERY)
    return probes


async def slow_readers(stack: Stack, token: str, sessions: list[str], seconds: float) -> list[int]:
    """A slow reader per session (SLOW_RATE B/s off a SLOW_RCVBUF-byte receive buffer), over
    both processes, each until its answer ends or `seconds` pass. The bytes each read."""
    stop = asyncio.Event()
    ports = [int(base.rsplit(":", 1)[1]) for base in stack.bases]
    readers = [
        asyncio.create_task(
            slow_reader(ports[i % len(ports)], token, s, SLOW_RATE, SLOW_RCVBUF, stop)
        )
        for i, s in enumerate(sessions)
    ]
    _, late = await asyncio.wait(readers, timeout=seconds)
    stop.set()
    await asyncio.gather(*late)
    return [task.result() for task in readers]


@dataclass
class Side:
    """What a phase measured beside its clients."""

    probes: Probes | None = None
    rss: Rss | None = None
    evicted: int | None = None
    slow_read: list[int] | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def run(self, work: Coroutine[Any, Any, None]) -> None:
        self.tasks.append(asyncio.create_task(work))


def alongside(
    stack: Stack,
    phase: str,
    side: Side,
    token: str,
    slow: list[str],
    ended: asyncio.Event,
    seconds: float,
) -> None:
    """What runs beside the clients from their start: /readyz bursts, slow readers."""
    if phase == "pool":

        async def probe() -> None:
            side.probes = await probe_readyz(stack.bases, ended)

        side.run(probe())
    if slow:

        async def read_slowly() -> None:
            side.slow_read = await slow_readers(stack, token, slow, seconds)

        side.run(read_slowly())


def evict(stack: Stack, side: Side, ended: asyncio.Event) -> None:
    """Redis made to evict until the clients end, and uncapped then."""

    async def fill() -> None:
        try:
            side.evicted = await fill_redis(stack.redis_url, ended)
        finally:
            await unfill_redis(stack.redis_url)

    side.run(fill())


class RssWatch:
    """The API processes' RSS through a phase: `start` before its clients, `finish` once they
    (and any slow readers) closed, RSS_SETTLE_SECONDS later."""

    def __init__(self, stack: Stack) -> None:
        processes = [psutil.Process(api.process.pid) for api in stack.apis if api.process]
        self.rss = RssSampler(processes)
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.before = self.rss.now()
        self.started = time.monotonic()
        self._task = asyncio.create_task(sample(self.rss, self._stop))

    async def finish(self) -> Rss:
        await asyncio.sleep(RSS_SETTLE_SECONDS)
        self._stop.set()
        if self._task is not None:
            await self._task
        return Rss(self.before, self.rss.peak_since(self.started), self.rss.now())
