"""Chaos benchmark: concurrent streams with Idempotency-Keys through faults, two API processes.

    python -m bench.chaos [--streams 200] [--phases nofault,redis,sigkill,sigterm,postgres]

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

Targets, with nothing lost: 0 pending, 0 duplicate turns for a key, 0 streams without a
terminal event, 0 complete answers stored as failed. Exits 0 either way: it is a benchmark.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

import httpx

from bench.chaos_client import StreamResult, run_client
from bench.chaos_report import PhaseReport, Row, print_reports, tally
from bench.chaos_stack import EXIT_SECONDS, READY_SECONDS, Stack
from bench.chat_overhead import PASSWORD

FAULTS = ("redis", "sigkill", "sigterm", "postgres")
PHASES = ("nofault", *FAULTS)
MAX_ATTEMPTS = 8
SETUP_ATTEMPTS = 10
WARM_UP_STREAMS = 8
MID_ANSWER_LIMIT_SECONDS = 60.0
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


def _restore(stack: Stack, phase: str) -> None:
    """Back to two ready API processes before the next phase."""
    if phase == "sigterm":  # let the graceful shutdown finish (uvicorn's bound is 10 s)
        stack.apis[1].wait(EXIT_SECONDS)
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


async def _setup(client: httpx.AsyncClient, bases: list[str], count: int) -> list[str]:
    """Log in and create one chat session per client."""

    async def login() -> str:
        response = await client.post(
            f"{bases[0]}/auth/token", json={"email": "bench@example.com", "password": PASSWORD}
        )
        response.raise_for_status()
        return str(response.json()["access_token"])

    token = await _with_retries(login)
    client.headers["Authorization"] = f"Bearer {token}"
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


async def _drive(stack: Stack, phase: str, options: Options) -> tuple[list[StreamResult], float]:
    limits = httpx.Limits(max_connections=options.streams * 2 + 40, max_keepalive_connections=0)
    timeout = httpx.Timeout(30.0, connect=5.0)
    async with httpx.AsyncClient(timeout=timeout, limits=limits) as client:
        sessions = await _setup(client, stack.bases, options.streams)
        run = uuid.uuid4().hex[:8]
        results = [StreamResult(i, s, f"chaos-{phase}-{run}-{i}") for i, s in enumerate(sessions)]
        started = time.monotonic()
        tasks = [
            asyncio.create_task(
                run_client(
                    client,
                    stack.bases,
                    r,
                    f"What do the onboarding notes say about step {i}?",
                    max_attempts=MAX_ATTEMPTS,
                    deadline_seconds=options.client_timeout,
                )
            )
            for i, r in enumerate(results)
        ]
        await _mid_answer(results, options.fault_after)
        fault_at = time.monotonic() - started
        if phase in FAULTS:
            await asyncio.to_thread(_inject, stack, phase, options)
        _, late = await asyncio.wait(tasks, timeout=options.client_timeout + 30)
        for task in late:  # run_client bounds itself; this is the backstop
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)
    return results, fault_at


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
    results, fault_at = asyncio.run(_drive(stack, phase, options))
    print(f"  clients ended after {time.monotonic() - started:.1f} s; counting", flush=True)
    assert stack.postgres is not None
    rows, waited = _settled_rows(
        stack.postgres.url, [r.session_id for r in results], options.pending_wait
    )
    report = tally(phase, results, rows)
    report.fault_at = None if phase == "nofault" else fault_at
    report.pending_wait_s = waited
    report.wall_s = time.monotonic() - started
    report.logged = stack.log_messages(marks)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument(
        "--phases",
        default=",".join(PHASES),
        help=f"comma-separated, in the order run (of {', '.join(PHASES)})",
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
    parser.add_argument("--tokens", type=int, default=30)
    parser.add_argument("--interval", type=float, default=0.2)
    parser.add_argument(
        "--log-dir",
        type=Path,
        default=None,
        help="keep the processes' logs here (default: a temp dir, removed)",
    )
    args = parser.parse_args()
    phases = [p.strip() for p in args.phases.split(",") if p.strip()]
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
    )
    stack = Stack(args.tokens, args.interval, args.log_dir)
    reports: list[PhaseReport] = []
    try:
        stack.start()
        print(
            f"two API processes {stack.bases}, model {args.tokens} tokens at "
            f"{args.interval * 1000:.0f} ms, Redis :{stack.redis_port}"
        )
        warm_up = replace(options, streams=WARM_UP_STREAMS)
        for phase in phases:
            # Cold processes answer their first turns slowly: warm both (restarted ones too).
            asyncio.run(_drive(stack, "warmup", warm_up))
            reports.append(run_phase(stack, phase, options))
            _restore(stack, phase)
    finally:
        stack.close()
        if reports:
            print_reports(reports)


if __name__ == "__main__":
    main()
