"""The cost of a turn (issue 32): CPU per turn, server and PostgreSQL, in four regimes.

    python -m bench.turn_cost [--base REF] [--long 200] [--clients 16] [--each 25]

One build at a time runs as a uvicorn process on loopback with the default configuration
(the onnx embedder, tool calling on, `THREADLINE_LLM=openai-compatible`) against
`bench/fake_openai.py` (40 tokens, no delay), on its own embedded PostgreSQL, with a small
knowledge base (twelve handbook pages) loaded first. Per build, for `/chat` and
`/chat/stream`, two regimes:

  * long:       1 session x `--long` turns, one after another;
  * concurrent: `--clients` sessions x `--each` turns, the sessions at once;

and, on this checkout only, the irreducible baseline in the same two regimes:
`POST /bench/baseline` (authenticate, read the session, write one turn row).

Printed per build, endpoint and regime: server CPU per turn (the uvicorn process and its
children, utime + stime), PostgreSQL CPU per turn (the postmaster and every backend, exited
ones included), commits and WAL bytes per turn, latency p50/p95 (first token for streams),
and the server's RSS after all of it. CPU is what the machine spent, so it is the figure to
compare across noisy runs; latency is printed beside it. `--base REF` measures the code of
REF as well (exported with `git archive`), with the same driver, model and questions.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import httpx
import psutil

from bench.chat_overhead import JWT_SECRET, PASSWORD, UNLIMITED, _redis_url
from bench.common import ROOT, bench_database, free_port, percentile
from bench.model_turn import TOPICS, checkout

QUESTIONS = [f"What is the rule for {topic}?" for topic, _ in TOPICS]
CHAT = ["/chat", "/chat/stream"]
STATS_FLUSH_SECONDS = 1.5
"""PostgreSQL backends report their transaction counts at most once a second, when idle."""
PREPARE = (
    "import asyncio, sys; from bench.chat_overhead import _prepare; "
    "asyncio.run(_prepare(sys.argv[1]))"
)


@dataclass
class Snapshot:
    server_cpu: float
    pg_cpu: float
    commits: int
    wal: int


@dataclass
class Regime:
    name: str
    sessions: int
    turns: int


def _tree_cpu(process: psutil.Process) -> float:
    """CPU seconds of `process`, its reaped children and its live ones."""
    times = process.cpu_times()
    total = times.user + times.system + times.children_user + times.children_system
    for child in process.children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            child_times = child.cpu_times()
            total += child_times.user + child_times.system
    return total


async def _snapshot(
    admin: asyncpg.Connection, server: psutil.Process, postmaster: psutil.Process
) -> Snapshot:
    await asyncio.sleep(STATS_FLUSH_SECONDS)  # backends report their counts when idle
    row = await admin.fetchrow(
        "SELECT xact_commit - sessions AS commits, "
        "pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint AS wal "
        "FROM pg_stat_database WHERE datname = current_database()"
    )
    assert row is not None
    return Snapshot(_tree_cpu(server), _tree_cpu(postmaster), int(row["commits"]), int(row["wal"]))


async def _login(client: httpx.AsyncClient) -> None:
    token = await client.post(
        "/auth/token", json={"email": "bench@example.com", "password": PASSWORD}
    )
    token.raise_for_status()
    client.headers["Authorization"] = f"Bearer {token.json()['access_token']}"


async def _load_knowledge(client: httpx.AsyncClient) -> None:
    for topic, text in TOPICS:
        body = {"title": topic.title(), "text": f"{text}\n\n" * 3}
        (await client.post("/kb/documents", json=body)).raise_for_status()
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        page = (await client.get("/kb/documents", params={"limit": 100})).json()["items"]
        if page and all(doc["status"] == "ready" for doc in page):
            return
        await asyncio.sleep(0.5)
    raise RuntimeError("the knowledge base was not ready in 300 s")


async def _one_turn(client: httpx.AsyncClient, path: str, session: str, question: str) -> float:
    """Seconds to the answer (`/chat`, the baseline) or to the first token (a stream)."""
    body = {"session_id": session, "message": question}
    started = time.perf_counter()
    if path != "/chat/stream":
        response = await client.post(path, json=body)
        response.raise_for_status()
        return time.perf_counter() - started
    first = None
    async with client.stream("POST", path, json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if first is None and line == "event: token":
                first = time.perf_counter() - started
    assert first is not None, "a stream without a token"
    return first


async def _regime(
    client: httpx.AsyncClient,
    path: str,
    regime: Regime,
    probe: tuple[asyncpg.Connection, psutil.Process, psutil.Process],
) -> str:
    sessions = [str((await client.post("/sessions")).json()["id"]) for _ in range(regime.sessions)]
    latencies: list[float] = []

    async def converse(index: int, session: str) -> None:
        for turn in range(regime.turns):
            question = QUESTIONS[(index + turn) % len(QUESTIONS)]
            latencies.append(await _one_turn(client, path, session, question))

    before = await _snapshot(*probe)
    await asyncio.gather(*(converse(i, s) for i, s in enumerate(sessions)))
    after = await _snapshot(*probe)
    turns = regime.sessions * regime.turns
    what = "first token" if path == "/chat/stream" else "latency"
    server_ms = 1000 * (after.server_cpu - before.server_cpu) / turns
    return (
        f"  {path:<16} {regime.name:<10} server {server_ms:6.1f} ms"
        f"  PostgreSQL {1000 * (after.pg_cpu - before.pg_cpu) / turns:6.1f} ms"
        f"  commits {(after.commits - before.commits) / turns:4.1f}"
        f"  WAL {(after.wal - before.wal) / turns / 1024:5.1f} KB"
        f"  {what} p50 {1000 * statistics.median(latencies):6.1f} ms"
        f" p95 {1000 * percentile(latencies, 95):6.1f} ms"
    )


async def _drive(
    base: str, owner_url: str, server_pid: int, paths: list[str], regimes: list[Regime]
) -> list[str]:
    admin = await asyncpg.connect(owner_url)
    try:
        backend = await admin.fetchval("SELECT pg_backend_pid()")
        postmaster = psutil.Process(backend).parent()
        assert postmaster is not None
        server = psutil.Process(server_pid)
        async with httpx.AsyncClient(base_url=base, timeout=120) as client:
            await _login(client)
            await _load_knowledge(client)
            await _one_turn(
                client, "/chat", str((await client.post("/sessions")).json()["id"]), "Warm up?"
            )
            lines = []
            for path in paths:
                for regime in regimes:
                    lines.append(await _regime(client, path, regime, (admin, server, postmaster)))
        lines.append(f"  server RSS after: {server.memory_info().rss / 2**20:.0f} MiB")
        return lines
    finally:
        await admin.close()


@contextlib.contextmanager
def _process(
    args: list[str], cwd: Path, env: dict[str, str], ready: str, answers: tuple[int, ...] = (200,)
) -> Iterator[subprocess.Popen[bytes]]:
    """`python args` in `cwd` until the block ends, once `ready` answers one of `answers`."""
    process = subprocess.Popen(
        [sys.executable, *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(cwd), **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            assert process.poll() is None, f"{args} exited"
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(ready, timeout=2).status_code in answers:
                    break
            assert time.monotonic() < deadline, f"{args} not ready in 90 s"
            time.sleep(0.3)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()


def _measure(label: str, code: Path, app: str, paths: list[str], regimes: list[Regime]) -> None:
    redis_url = _redis_url()
    with bench_database() as owner_url:
        subprocess.run(
            [sys.executable, "-c", PREPARE, owner_url],
            cwd=code,
            check=True,
            env={**os.environ, "PYTHONPATH": str(code)},
        )
        model_port, app_port = free_port(), free_port()
        env = {
            "DATABASE_URL": owner_url,
            "THREADLINE_JWT_SECRET": JWT_SECRET,
            "THREADLINE_LOG_LEVEL": "WARNING",
            "THREADLINE_LLM": "openai-compatible",
            "OPENAI_BASE_URL": f"http://127.0.0.1:{model_port}/v1",
            "OPENAI_API_KEY": "bench",
            "THREADLINE_REDIS_PREFIX": f"cost{uuid.uuid4().hex[:8]}:",
            **UNLIMITED,
            **({"REDIS_URL": redis_url} if redis_url else {}),
        }
        fake = [
            "-m",
            "bench.fake_openai",
            "--port",
            str(model_port),
            "--tokens",
            "40",
            "--interval",
            "0",
        ]
        server = [
            "-m",
            "uvicorn",
            app,
            "--factory",
            "--port",
            str(app_port),
            "--log-level",
            "warning",
            "--no-access-log",
        ]
        base = f"http://127.0.0.1:{app_port}"
        with (
            _process(fake, ROOT, {}, f"http://127.0.0.1:{model_port}/", answers=(404,)),
            _process(server, code, env, f"{base}/readyz") as api,
        ):
            lines = asyncio.run(_drive(base, owner_url, api.pid, paths, regimes))
    print(f"\n{label}")
    for line in lines:
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", help="a git ref to measure as well")
    parser.add_argument("--long", type=int, default=200)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--each", type=int, default=25)
    args = parser.parse_args()
    regimes = [Regime("long", 1, args.long), Regime("concurrent", args.clients, args.each)]
    print("CPU per turn (server = uvicorn and its children; PostgreSQL = postmaster and backends)")
    _measure(
        "irreducible baseline (POST /bench/baseline, this checkout)",
        ROOT,
        "bench.bench_app:baseline_factory",
        ["/bench/baseline"],
        regimes,
    )
    _measure("this checkout", ROOT, "app.main:app_factory", CHAT, regimes)
    if args.base:
        with checkout(args.base) as code:
            _measure(f"base {args.base}", code, "app.main:app_factory", CHAT, regimes)


if __name__ == "__main__":
    main()
