"""What slow readers of `/chat/stream` cost the API process (issue 31, item 10; ADR 0083).

    python -m bench.slow_readers [--slow 60] [--tokens 1500] [--interval 0.004]
                                 [--read-seconds 30] [--rate 512] [--rcvbuf 2048]
                                 [--probe-trim] [--env NAME=VALUE]

One `threadline serve` process on loopback, its own `redis-server`, and the fast fake
OpenAI-compatible model (bench/fake_openai.py: `--tokens` words, one every `--interval` s),
on a database of $BENCH_DATABASE_URL (else an embedded PostgreSQL). Then:

1. a few normal clients each time the first token of a turn (the baseline);
2. `--slow` clients start a turn each on a socket whose receive buffer is `--rcvbuf` bytes and
   read `--rate` bytes a second, a few bytes at a time, so the kernel's buffers fill and
   backpressure reaches the server: the model answers far faster than they read. Once every
   one of their answers is written (`threadline_streams_ended_total`), while they still read,
   the server's RSS is taken and the normal clients time their first token again;
3. after `--read-seconds` (at least) the slow clients close their sockets abruptly; the RSS
   is sampled 5 s and 20 s after (and, with `--probe-trim`, once more after gdb has made the
   server call `malloc_trim(0)`: is what stays the C allocator's free memory?).

Printed: RSS before, with the answers written, at the peak, and after the clients closed, each
also as growth per slow client (KiB: a count, meaningful on a shared machine, where absolute
latencies are not); how many readers fell behind and read the Redis buffer in pages
(`threadline_streams_behind_total`); the normal clients' first-token times (relative only).
Every process here is one this bench started, stopped by its PID.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

from bench.chat_overhead import JWT_SECRET, PASSWORD, UNLIMITED, _prepare
from bench.common import ROOT, bench_database, free_port
from bench.slow_reading import Rss, sample, slow_reader

KIB, MIB = 1024, 1024 * 1024
AFTER_SECONDS = (5.0, 20.0)
NORMAL_CLIENTS = 3
READY_SECONDS = 90.0
NO_DISK = ("--bind", "127.0.0.1", "--save", "", "--appendonly", "no")


async def _first_token(client: httpx.AsyncClient, session_id: str) -> float:
    """Seconds from the request to the first token (then the client stops reading)."""
    started = time.perf_counter()
    body = {"session_id": session_id, "message": "Hello, what is new?"}
    async with client.stream("POST", "/chat/stream", json=body) as response:
        async for text in response.aiter_text():
            if "event: token" in text:
                return time.perf_counter() - started
    return float("nan")


async def _normal(client: httpx.AsyncClient, sessions: list[str]) -> list[float]:
    return list(await asyncio.gather(*(_first_token(client, s) for s in sessions)))


async def _metric(client: httpx.AsyncClient, name: str) -> float:
    """The sum of a counter's series in the server's /metrics."""
    text = (await client.get("/metrics")).text
    pattern = rf"^{name}(?:{{[^}}]*}})?\s+(\S+)$"
    return sum(float(value) for value in re.findall(pattern, text, re.M))


async def _all_ended(client: httpx.AsyncClient, target: float, seconds: float) -> bool:
    """Until `target` turns have ended since the server started (bounded in time)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if await _metric(client, "threadline_streams_ended_total") >= target:
            return True
        await asyncio.sleep(1.0)
    return False


async def _bench(base: str, port: int, args: argparse.Namespace, rss: Rss) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=300) as client:
        token = (
            await client.post(
                "/auth/token", json={"email": "bench@example.com", "password": PASSWORD}
            )
        ).json()["access_token"]
        client.headers["Authorization"] = f"Bearer {token}"
        sessions = [
            (await client.post("/sessions", json={"title": f"s{i}"})).json()["id"]
            for i in range(args.slow + NORMAL_CLIENTS)
        ]
        normal_sessions, slow_sessions = sessions[:NORMAL_CLIENTS], sessions[NORMAL_CLIENTS:]
        # Warm the process (imports, pools, the first turn's caches), then the baseline.
        await _normal(client, normal_sessions)
        baseline = await _normal(client, normal_sessions)
        # The normal clients left after their first token: their runs end after the grace.
        await _all_ended(client, 2 * NORMAL_CLIENTS, 120)
        ended_before = await _metric(client, "threadline_streams_ended_total")
        behind_before = await _metric(client, "threadline_streams_behind_total")
        before = rss.now()

        stop_sampling, stop_reading = asyncio.Event(), asyncio.Event()
        sampling = asyncio.create_task(sample(rss, stop_sampling))
        started = time.monotonic()
        readers = [
            asyncio.create_task(slow_reader(port, token, s, args.rate, args.rcvbuf, stop_reading))
            for s in slow_sessions
        ]
        # Every slow client's answer is written (the model is far faster than they read);
        # they are still reading it: what the server holds for them now is their backlog.
        generated = await _all_ended(client, ended_before + args.slow, 600)
        held = rss.now()
        during = await _normal(client, normal_sessions)
        await asyncio.sleep(max(0.0, started + args.read_seconds - time.monotonic()))
        at_close = rss.now()
        peak = rss.peak_since(started)
        stop_reading.set()
        read = await asyncio.gather(*readers)
        closed = time.monotonic()
        after: dict[float, int] = {}
        for wait in AFTER_SECONDS:
            await asyncio.sleep(max(0.0, closed + wait - time.monotonic()))
            after[wait] = rss.now()
        stop_sampling.set()
        await sampling
        behind = await _metric(client, "threadline_streams_behind_total") - behind_before
        trimmed = _malloc_trim(rss) if args.probe_trim else None

    n = args.slow

    def per(value: int) -> str:
        return f"{(value - before) / KIB / n:7.1f} KiB/slow client"

    print(
        f"\n{n} slow readers of /chat/stream ({args.rate} B/s, SO_RCVBUF {args.rcvbuf}), "
        f"answers of {args.tokens} tokens; one threadline serve process"
    )
    print(f"  every answer written while they read: {generated}")
    print(f"  RSS before                      {before / MIB:7.1f} MiB")
    print(f"  RSS, answers written, reading   {held / MIB:7.1f} MiB   {per(held)}")
    print(f"  RSS peak while reading          {peak / MIB:7.1f} MiB   {per(peak)}")
    print(f"  RSS when they closed            {at_close / MIB:7.1f} MiB   {per(at_close)}")
    for wait, value in after.items():
        print(f"  RSS {wait:4.0f} s after closing         {value / MIB:7.1f} MiB   {per(value)}")
    if trimmed is not None:
        print(f"  RSS after malloc_trim(0)        {trimmed / MIB:7.1f} MiB   {per(trimmed)}")
    print(f"  readers that fell behind and read the buffer in pages: {behind:.0f} of {n}")
    print(f"  bytes read per slow client: median {statistics.median(read):.0f}")
    print(
        "  first token of a normal client (relative only: a shared machine): "
        f"baseline median {statistics.median(baseline):.2f} s, "
        f"while the slow readers hold their answers {statistics.median(during):.2f} s"
    )


def _malloc_trim(rss: Rss) -> int | None:
    """Whether the memory kept after the clients left is the C allocator's free lists: ask
    the server to `malloc_trim(0)` once, through gdb (a probe, not something the app does),
    and measure again. None without gdb."""
    gdb = shutil.which("gdb")
    if gdb is None:
        return None
    subprocess.run(
        [gdb, "-p", str(rss.processes[0].pid), "-batch", "-ex", "call (int) malloc_trim(0)"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )
    time.sleep(1.0)
    return rss.now()


def _start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out
        )


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_ready(base: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the API process exited: {log.read_text()[-3000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                return
        time.sleep(0.25)
    raise RuntimeError("the API process did not become ready")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slow", type=int, default=60)
    parser.add_argument("--tokens", type=int, default=1500)
    parser.add_argument("--interval", type=float, default=0.004)
    parser.add_argument("--read-seconds", type=float, default=30.0)
    parser.add_argument("--rate", type=int, default=512, help="bytes a second per slow reader")
    parser.add_argument("--rcvbuf", type=int, default=2048)
    parser.add_argument("--api-port", type=int, default=0, help="0: a free one")
    parser.add_argument("--model-port", type=int, default=0)
    parser.add_argument("--redis-port", type=int, default=0)
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for the API")
    parser.add_argument(
        "--probe-trim", action="store_true", help="then malloc_trim(0) the server via gdb"
    )
    parser.add_argument("--keep-logs", type=Path, default=None, help="copy the logs here")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="tl-slow-"))
    processes: list[subprocess.Popen[bytes]] = []
    try:
        redis_port = args.redis_port or free_port()
        model_port = args.model_port or free_port()
        api_port = args.api_port or free_port()
        redis = shutil.which("redis-server") or "redis-server"
        pace = ["--tokens", str(args.tokens), "--interval", str(args.interval)]
        processes.append(
            _start(
                [redis, "--port", str(redis_port), *NO_DISK, "--dir", str(root)],
                dict(os.environ),
                root / "redis.log",
            )
        )
        processes.append(
            _start(
                [sys.executable, "-m", "bench.fake_openai", "--port", str(model_port), *pace],
                dict(os.environ),
                root / "model.log",
            )
        )
        with bench_database() as owner_url:
            asyncio.run(_prepare(owner_url))
            env = {
                **os.environ,
                "DATABASE_URL": owner_url,
                "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
                "CELERY_BROKER_URL": "",
                "THREADLINE_ENV": "development",
                "THREADLINE_DATA_DIR": str(root / "data"),
                "THREADLINE_JWT_SECRET": JWT_SECRET,
                "THREADLINE_ACCESS_TOKEN_TTL_SECONDS": "86400",
                "THREADLINE_LLM": "openai-compatible",
                "OPENAI_BASE_URL": f"http://127.0.0.1:{model_port}/v1",
                "THREADLINE_LOG_LEVEL": "WARNING",
                **UNLIMITED,
                **dict(item.split("=", 1) for item in args.env),
            }
            threadline = str(Path(sys.executable).parent / "threadline")
            api = _start(
                [threadline, "serve", "--host", "127.0.0.1", "--port", str(api_port)],
                env,
                root / "api.log",
            )
            processes.append(api)
            base = f"http://127.0.0.1:{api_port}"
            _wait_ready(base, api, root / "api.log")
            asyncio.run(_bench(base, api_port, args, Rss([psutil.Process(api.pid)])))
            _stop(api)
    finally:
        for process in reversed(processes):
            _stop(process)
        if args.keep_logs is not None:
            args.keep_logs.mkdir(parents=True, exist_ok=True)
            for log in root.glob("*.log"):
                shutil.copy(log, args.keep_logs / log.name)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
