"""Chaos benchmark: concurrent streams with Idempotency-Keys through faults, two API processes.

    python -m bench.chaos [--streams 200] [--phases nofault,redis,sigkill,sigterm,postgres]
    python -m bench.chaos --streams 40 --phases nofault,eviction,lease,stop,pg-restart,pool,\
        slow-readers [--pause 18] [--pool-size 2] [--redis-port P] [--http-port-base P]

Starts an embedded PostgreSQL, its own `redis-server`, a fake OpenAI-compatible model on
loopback (30 tokens at 200 ms: six seconds an answer) and two `threadline serve` processes
sharing them. Each phase starts `--streams` clients spread over both processes, each in its own
chat session with its own Idempotency-Key (bench/chaos_client.py: resume on the other process
with Last-Event-ID, or re-post with the same key), injects its fault once half the streams have
their first token (at least `--fault-after` s in, at most 60 s: on a loaded machine first
tokens come late), waits for the clients (each bounded by `--client-timeout`), then gives the
turns `--pending-wait` s to settle and counts from PostgreSQL:

  nofault   nothing happens (the baseline for time to first token);
  redis     redis-server killed with SIGKILL and restarted empty on the same port;
  sigkill   API process A killed with SIGKILL (restarted after the phase);
  sigterm   API process B sent SIGTERM, shutting down gracefully (restarted after the phase);
  postgres  PostgreSQL stopped (fast shutdown) for `--pg-down` s, then started again.

Then each client's key is posted again (a replay, on the settled turns) and compared with what
its stream was told and what the rows hold. The phases that found issue 31's breaks:

  eviction     redis-server capped at its use plus 8 MiB with `allkeys-lru`, and filler keys
               (64 KiB, at most 3,000, one every 20 ms until the clients end) make it evict;
               each client drops its connection at the answer's last word and resumes 3 s
               later on the other process. Targets: no key answered twice (stream, replay,
               rows), no resume answered 404 (a finished turn's evicted buffer is read back
               from its row, ADR 0069), no stream told another outcome than its row holds.
  lease        both processes started with a 10 s turn lease (renewed every 2 s, swept every
               3 s); process A paused with SIGSTOP for `--pause` s (past the lease: B finishes
               its turns as orphans), then SIGCONT. Targets: no key answered twice, no stream
               told another outcome than its row holds (ADR 0068).
  stop         no fault: each client presses Stop 0-250 ms after the answer's last word, on the
               other process, racing the final write. Target: told vs stored, 0.
  pg-restart   PostgreSQL stopped as by a crash (immediate shutdown) and started at once.
               Target (beside pending 0): no whole answer received whose turn is not stored
               complete.
  pool         both processes started with a database pool of `--pool-size` (no overflow);
               bursts of 10 /readyz every 0.5 s beside the streams. Targets: /readyz never
               503 or PostgreSQL `down` (it is up throughout; busy is not down, ADR 0046), no
               5xx but a 503 with an error code.
  slow-readers a quarter as many clients again read their own turn at 512 B/s off a 2 KiB
               receive buffer (bench/slow_reading.py). The API processes' RSS before, at the
               peak and 10 s after the slow readers closed (also measured in nofault, for
               scale), and the normal clients' first token beside nofault's. Target: the RSS
               back within 8 MiB of before.

Targets of every phase, with nothing lost: 0 pending, 0 duplicate turns for a key, 0 streams
without a terminal event, 0 complete answers stored as failed. Exits 0 either way: it is a
benchmark. Ports: `--redis-port` and `--http-port-base` (the two APIs, then the model), free
ones by default.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

import httpx

from bench import chaos_faults as faults
from bench.chaos_client import Script, StreamResult, run_client
from bench.chaos_report import PhaseReport, Row, print_reports, tally
from bench.chaos_stack import EXIT_SECONDS, READY_SECONDS, Stack
from bench.chat_overhead import PASSWORD


@dataclass(frozen=True)
class Phase:
    """What a phase's clients do beside reading, its own targets, whether RSS is watched."""

    script: Script = field(default_factory=Script)
    own_targets: tuple[str, ...] = ()
    rss: bool = False


PHASES = {
    "nofault": Phase(rss=True),
    "redis": Phase(),
    "sigkill": Phase(),
    "sigterm": Phase(),
    "postgres": Phase(),
    "eviction": Phase(
        Script(resume_after=3.0), ("two answers per key", "resumes 404", "told vs stored")
    ),
    "lease": Phase(own_targets=("two answers per key", "told vs stored")),
    "stop": Phase(Script(stop_within=0.25), ("told vs stored",)),
    "pg-restart": Phase(own_targets=("answers lost",)),
    "pool": Phase(own_targets=("readyz down", "5xx w/o 503+code")),
    "slow-readers": Phase(own_targets=("RSS MiB kept",), rss=True),
}
CLASSIC = ("nofault", "redis", "sigkill", "sigterm", "postgres")
"""The default phases (issue 13's)."""
FAULTS = ("redis", "sigkill", "sigterm", "postgres", "lease", "pg-restart")
"""The phases whose fault `_inject` brings (eviction's filler starts at the same moment)."""
LEASE_SETTINGS = {
    "THREADLINE_TURN_LEASE_SECONDS": "10",
    "THREADLINE_TURN_LEASE_RENEW_SECONDS": "2",
    "THREADLINE_TURN_SWEEP_SECONDS": "3",
}
SLOW_READER_SHARE = 4
"""The slow-readers phase adds one slow reader per this many clients."""
MAX_ATTEMPTS = 8
SETUP_ATTEMPTS = 10
WARM_UP_STREAMS = 8
MID_ANSWER_LIMIT_SECONDS = 60.0
REPLAY_ATTEMPTS = 3
REPLAY_SECONDS = 30.0
T = TypeVar("T")


@dataclass
class Options:
    streams: int
    phases: list[str]
    fault_after: float
    client_timeout: float
    pending_wait: float
    pg_down: float
    redis_down: float
    pause: float
    pool_size: int


def _settings(phase: str, options: Options) -> dict[str, str]:
    """The API processes' settings the phase needs (restarted with them, and back after)."""
    if phase == "lease":
        return LEASE_SETTINGS
    if phase == "pool":
        return {
            "THREADLINE_DB_POOL_SIZE": str(options.pool_size),
            "THREADLINE_DB_MAX_OVERFLOW": "0",
        }
    return {}


def _inject(stack: Stack, phase: str, options: Options) -> None:
    """The phase's fault (blocking: run in a thread)."""
    if phase == "redis":
        stack.kill_redis_and_restart(options.redis_down)
    elif phase == "sigkill":
        stack.apis[0].signal(signal.SIGKILL)
    elif phase == "sigterm":
        stack.apis[1].signal(signal.SIGTERM)
    elif phase == "postgres":
        assert stack.postgres is not None
        stack.postgres.stop()
        time.sleep(options.pg_down)
        stack.postgres.start()
    elif phase == "lease":
        faults.pause(stack.apis[0], options.pause)
    elif phase == "pg-restart":
        faults.crash_restart_postgres(stack)


def _restore(stack: Stack, phase: str, options: Options) -> None:
    """Back to two ready API processes, with the stack's settings, before the next phase."""
    if phase == "sigterm":  # let the graceful shutdown finish (uvicorn's bound is 10 s)
        stack.apis[1].wait(EXIT_SECONDS)
    if _settings(phase, options):
        stack.restart_apis({})
    for index, api in enumerate(stack.apis):
        if not api.running:
            stack.restart_api(index)
    for index, api in enumerate(stack.apis):
        if not stack.wait_ready(index):
            print(f"  ({api.name} not ready after {READY_SECONDS:.0f} s: going on)", flush=True)


async def _with_retries(make: Callable[[], Awaitable[T]]) -> T:
    for attempt in range(SETUP_ATTEMPTS):
        try:
            return await make()
        except (httpx.HTTPError, KeyError, ValueError):
            if attempt == SETUP_ATTEMPTS - 1:
                raise
            await asyncio.sleep(0.5 * (attempt + 1))
    raise AssertionError("unreachable")


async def _login(client: httpx.AsyncClient, base: str) -> str:
    """Log `client` in (its requests carry the token from now on); the token."""

    async def login() -> str:
        response = await client.post(
            f"{base}/auth/token", json={"email": "bench@example.com", "password": PASSWORD}
        )
        response.raise_for_status()
        return str(response.json()["access_token"])

    token = await _with_retries(login)
    client.headers["Authorization"] = f"Bearer {token}"
    return token


async def _setup(client: httpx.AsyncClient, bases: list[str], count: int) -> list[str]:
    """Log in and create one chat session per client."""
    await _login(client, bases[0])
    gate = asyncio.Semaphore(20)

    async def one(i: int) -> str:
        async def create() -> str:
            response = await client.post(f"{bases[i % 2]}/sessions", json={"title": f"c{i}"})
            response.raise_for_status()
            return str(response.json()["id"])

        async with gate:
            return await _with_retries(create)

    return list(await asyncio.gather(*(one(i) for i in range(count))))


async def _mid_answer(results: list[StreamResult], minimum: float) -> None:
    """Until half the streams have their first token (and at least `minimum` s have gone)."""
    started = time.monotonic()
    while time.monotonic() - started < MID_ANSWER_LIMIT_SECONDS:
        got = sum(r.first_token_s is not None for r in results)
        if time.monotonic() - started >= minimum and got * 2 >= len(results):
            return
        await asyncio.sleep(0.1)


def _message(index: int) -> str:
    return f"What do the onboarding notes say about step {index}?"


async def _drive(
    stack: Stack, name: str, options: Options
) -> tuple[list[StreamResult], float, faults.Side]:
    phase = PHASES.get(name, Phase())
    slow = options.streams // SLOW_READER_SHARE if name == "slow-readers" else 0
    limits = httpx.Limits(
        max_connections=options.streams * 2 + slow + 40, max_keepalive_connections=0
    )
    timeout = httpx.Timeout(30.0, connect=5.0)
    side, ended = faults.Side(), asyncio.Event()
    async with httpx.AsyncClient(timeout=timeout, limits=limits) as client:
        sessions = await _setup(client, stack.bases, options.streams + slow)
        token = client.headers["Authorization"].removeprefix("Bearer ")
        run = uuid.uuid4().hex[:8]
        results = [
            StreamResult(i, s, f"chaos-{name}-{run}-{i}")
            for i, s in enumerate(sessions[: options.streams])
        ]
        watch = faults.RssWatch(stack) if phase.rss else None
        if watch is not None:
            watch.start()
        started = time.monotonic()
        tasks = [
            asyncio.create_task(
                run_client(
                    client,
                    stack.bases,
                    r,
                    _message(i),
                    max_attempts=MAX_ATTEMPTS,
                    deadline_seconds=options.client_timeout,
                    script=phase.script,
                )
            )
            for i, r in enumerate(results)
        ]
        slow_sessions = sessions[options.streams :]
        faults.alongside(stack, name, side, token, slow_sessions, ended, options.client_timeout)
        await _mid_answer(results, options.fault_after)
        fault_at = time.monotonic() - started
        if name == "eviction":
            faults.evict(stack, side, ended)
        if name in FAULTS:
            await asyncio.to_thread(_inject, stack, name, options)
        _, late = await asyncio.wait(tasks, timeout=options.client_timeout + 30)
        for task in late:  # run_client bounds itself; this is the backstop
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)
        ended.set()
        await asyncio.gather(*side.tasks)
        if watch is not None:
            side.rss = await watch.finish()
    return results, fault_at, side


async def _replays(stack: Stack, results: list[StreamResult]) -> list[StreamResult]:
    """Each client's request posted again with its key, once its turn settled: what a retry
    is answered now (its replay, or a new turn if the key was forgotten)."""
    gate = asyncio.Semaphore(10)
    async with httpx.AsyncClient(timeout=httpx.Timeout(30.0, connect=5.0)) as client:
        # Process A is still down after the sigkill phase (it is restarted after the count).
        alive = [base for base, api in zip(stack.bases, stack.apis, strict=True) if api.running]
        await _login(client, alive[0])

        async def replay(r: StreamResult) -> StreamResult:
            again = StreamResult(r.index, r.session_id, r.key)
            async with gate:
                return await run_client(
                    client,
                    stack.bases,
                    again,
                    _message(r.index),
                    max_attempts=REPLAY_ATTEMPTS,
                    deadline_seconds=REPLAY_SECONDS,
                )

        return list(await asyncio.gather(*(replay(r) for r in results)))


def _rows(url: str, sessions: list[str]) -> list[Row]:
    import psycopg

    with psycopg.connect(url, connect_timeout=10) as conn:
        cursor = conn.execute(
            "SELECT session_id::text, id::text, status FROM query_history"
            " WHERE session_id = ANY(%s::uuid[])",
            (sessions,),
        )
        return [(str(s), str(i), str(st)) for s, i, st in cursor.fetchall()]


def _settled_rows(url: str, sessions: list[str], wait: float) -> tuple[list[Row], float]:
    """The phase's turns once none is pending, or after `wait` seconds."""
    started = time.monotonic()
    rows: list[Row] = []
    while True:
        try:
            rows = _rows(url, sessions)
        except Exception as exc:  # PostgreSQL still coming back
            print(f"  (counting failed: {type(exc).__name__}; retrying)")
        else:
            if not any(status == "pending" for _, _, status in rows):
                break
        if time.monotonic() - started >= wait:
            break
        time.sleep(1.0)
    return rows, time.monotonic() - started


def run_phase(stack: Stack, phase: str, options: Options) -> PhaseReport:
    print(f"\n-- phase {phase}: {options.streams} streams", flush=True)
    started = time.monotonic()
    marks = stack.log_marks()
    results, fault_at, side = asyncio.run(_drive(stack, phase, options))
    print(f"  clients ended after {time.monotonic() - started:.1f} s; counting", flush=True)
    assert stack.postgres is not None
    rows, waited = _settled_rows(
        stack.postgres.url, [r.session_id for r in results], options.pending_wait
    )
    replays = asyncio.run(_replays(stack, results))
    report = tally(phase, results, rows, replays)
    report.fault_at = fault_at if phase in (*FAULTS, "eviction") else None
    report.pending_wait_s = waited
    report.wall_s = time.monotonic() - started
    report.logged = stack.log_messages(marks)
    report.own_targets = PHASES[phase].own_targets
    report.probes, report.rss = side.probes, side.rss
    report.evicted, report.slow_read = side.evicted, side.slow_read
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument(
        "--phases",
        default=",".join(CLASSIC),
        help=f"comma-separated, in the order run (of {', '.join(PHASES)}), or all",
    )
    parser.add_argument("--fault-after", type=float, default=2.0)
    parser.add_argument(
        "--client-timeout",
        type=float,
        default=240.0,
        help="each client's bound, all attempts included (a resume whose "
        "producer died may wait LLM timeout + 30 s for stream_lost)",
    )
    parser.add_argument("--pending-wait", type=float, default=60.0)
    parser.add_argument("--pg-down", type=float, default=10.0)
    parser.add_argument("--redis-down", type=float, default=1.0)
    parser.add_argument(
        "--pause", type=float, default=18.0, help="lease: SIGSTOP seconds (lease 10 s, sweep 3)"
    )
    parser.add_argument("--pool-size", type=int, default=2, help="pool: the database pool")
    parser.add_argument("--redis-port", type=int, default=0, help="0: a free one")
    parser.add_argument(
        "--http-port-base", type=int, default=0, help="the APIs' and the model's (0: free ones)"
    )
    parser.add_argument("--tokens", type=int, default=30)
    parser.add_argument("--interval", type=float, default=0.2)
    parser.add_argument(
        "--log-dir",
        type=Path,
        default=None,
        help="keep the processes' logs here (default: a temp dir, removed)",
    )
    args = parser.parse_args()
    chosen = ",".join(PHASES) if args.phases == "all" else args.phases
    phases = [p.strip() for p in chosen.split(",") if p.strip()]
    unknown = [p for p in phases if p not in PHASES]
    if unknown:
        parser.error(f"unknown phases: {', '.join(unknown)}")
    options = Options(
        args.streams,
        phases,
        args.fault_after,
        args.client_timeout,
        args.pending_wait,
        args.pg_down,
        args.redis_down,
        args.pause,
        args.pool_size,
    )
    stack = Stack(args.tokens, args.interval, args.log_dir, args.redis_port, args.http_port_base)
    reports: list[PhaseReport] = []
    try:
        stack.start()
        print(
            f"two API processes {stack.bases}, model {args.tokens} tokens at "
            f"{args.interval * 1000:.0f} ms, Redis :{stack.redis_port}"
        )
        warm_up = replace(options, streams=WARM_UP_STREAMS)
        for phase in phases:
            settings = _settings(phase, options)
            if settings:
                stack.restart_apis(settings)
            # Cold processes answer their first turns slowly: warm both (restarted ones too).
            asyncio.run(_drive(stack, "warmup", warm_up))
            reports.append(run_phase(stack, phase, options))
            _restore(stack, phase, options)
    finally:
        stack.close()
        if reports:
            print_reports(reports)


if __name__ == "__main__":
    main()
