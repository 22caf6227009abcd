"""The hostile-file set against a real server: each file's outcome, the server's peak memory
and /healthz latency while it is read (issue 29, item 7).

    python -m bench.hostile_files [--api-port 0] [--redis-port 0] [--baseline 8] [--only NAME]

One `threadline serve` process on loopback (its ingestion worker processes are its children),
its own `redis-server`, a database of $BENCH_DATABASE_URL (else an embedded PostgreSQL).
First /healthz alone (the same server, unattacked, in the same run); then each hostile file
of `tests/knowledge/hostile.py` is uploaded to `/kb/documents` by an admin, one at a time,
and polled until `ready` or `failed`, while /healthz is probed open-loop every 20 ms
(`bench.upload_stall`'s probe; for at least 3 s a file) and the RSS of the server process and
of its children is sampled every 100 ms. Printed per file: final status and reason, seconds
to that status, peak RSS of the API process and of its worker processes (summed), and
/healthz p50/p95 beside the unattacked figures. On a shared machine the latencies are
relative only; the statuses, reasons and memory are the point.
Every process here is one this bench started, stopped by its PID.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import httpx
import psutil

from bench.chat_overhead import JWT_SECRET, PASSWORD, UNLIMITED, _prepare
from bench.common import bench_database, free_port, percentile
from bench.slow_readers import NO_DISK, _start, _stop, _wait_ready
from bench.upload_stall import Memory, Probes, _probe_until, _watch_memory
from tests.knowledge.format_files import SAMPLES
from tests.knowledge.hostile import (
    DEEP_HTML,
    LYING_PDFS,
    external_entity_epub,
    laughing_odt,
    macro_docx,
    million_empty_cells,
    zip_bomb,
)

MIB = 1024 * 1024
INGEST_TIMEOUT = 300.0
MIN_WINDOW = 3.0


def hostile_set() -> dict[str, Callable[[], bytes]]:
    """Each hostile file by the name it is uploaded under (a name that says nothing of its
    type: the server types by content)."""
    files: dict[str, Callable[[], bytes]] = {
        f"bomb-{kind}": partial(zip_bomb, kind) for kind in ("docx", "xlsx", "pptx", "epub", "odt")
    }
    files["laughs-odt"] = laughing_odt
    files["external-entity-epub"] = external_entity_epub
    files["macro-docx"] = macro_docx
    files["million-cells-xlsx"] = million_empty_cells
    files["deep-html"] = lambda: DEEP_HTML
    for lie, pair in LYING_PDFS.items():
        files[f"pdf-{lie}"] = partial(_first, pair)
    return files


def _first(pair: tuple[bytes, str | None]) -> bytes:
    return pair[0]


@dataclass
class Outcome:
    name: str
    size: int
    status: str
    reason: str
    seconds: float
    probes: Probes
    peak_api: int
    peak_workers: int


async def _ingest(client: httpx.AsyncClient, name: str, data: bytes) -> tuple[str, str]:
    """Upload one file and wait for its final status; (status, reason)."""
    response = await client.post("/kb/documents", files={"file": (name, data)})
    if response.status_code != 202:
        return f"HTTP {response.status_code}", response.text[:160]
    document = response.json()["id"]
    deadline = time.monotonic() + INGEST_TIMEOUT
    while time.monotonic() < deadline:
        body = (await client.get(f"/kb/documents/{document}")).json()
        if body["status"] in ("ready", "failed"):
            return body["status"], body.get("error") or ""
        await asyncio.sleep(0.25)
    return "timeout", f"not done in {INGEST_TIMEOUT:.0f} s"


async def _one(
    client: httpx.AsyncClient, base: str, memory: Memory, name: str, data: bytes
) -> Outcome:
    memory.peak_api = memory.peak_workers = 0
    probes, stop = Probes(), asyncio.Event()
    watching = asyncio.create_task(_watch_memory(memory, stop))
    probing = asyncio.create_task(_probe_until(base, stop, probes))
    started = time.perf_counter()
    status, reason = await _ingest(client, name, data)
    seconds = time.perf_counter() - started
    # At least MIN_WINDOW of probes, so a file refused in a blink still has a p95.
    await asyncio.sleep(max(0.0, MIN_WINDOW - seconds))
    stop.set()
    await asyncio.gather(probing, watching)
    return Outcome(
        name, len(data), status, reason, seconds, probes, memory.peak_api, memory.peak_workers
    )


def _latency(probes: Probes) -> str:
    if not probes.latencies:
        return "no probes"
    values = probes.latencies
    return (
        f"p50 {statistics.median(values):6.1f}  p95 {percentile(values, 95):6.1f} ms"
        f" (n={len(values)}{f', errors {probes.errors}' if probes.errors else ''})"
    )


async def _bench(base: str, server: psutil.Process, args: argparse.Namespace) -> None:
    files = hostile_set()
    if args.only:
        files = {name: make for name, make in files.items() if args.only in name}
    memory = Memory(server)
    async with httpx.AsyncClient(base_url=base, timeout=120) as client:
        token = await client.post(
            "/auth/token", json={"email": "bench@example.com", "password": PASSWORD}
        )
        client.headers["Authorization"] = f"Bearer {token.json()['access_token']}"
        # A binary format always goes to the worker pool: its processes start before the
        # baseline, so their idle memory is the baseline's.
        warm = await _ingest(client, "warm", SAMPLES["docx"]().data)
        await asyncio.sleep(1.0)
        api_idle, workers_idle = memory.sample()
        baseline, stop = Probes(), asyncio.Event()
        probing = asyncio.create_task(_probe_until(base, stop, baseline))
        await asyncio.sleep(args.baseline)
        stop.set()
        await probing
        outcomes = [await _one(client, base, memory, n, make()) for n, make in files.items()]
        api_end, workers_end = memory.sample()

    print(
        f"\nThe hostile-file set, one at a time, against one `threadline serve` (warm-up {warm[0]})"
    )
    print(
        f"  unattacked: /healthz {_latency(baseline)};  RSS API {api_idle / MIB:.0f} MiB, "
        f"workers {workers_idle / MIB:.0f} MiB"
    )
    print(
        f"  {'file':<28}{'KiB':>8}  {'status':<8}{'s':>6}  {'API peak':>10}{'workers':>10}  "
        "/healthz during (ms)                reason"
    )
    for o in outcomes:
        print(
            f"  {o.name:<28}{o.size / 1024:8.0f}  {o.status:<8}{o.seconds:6.1f}  "
            f"{o.peak_api / MIB:6.0f} MiB{o.peak_workers / MIB:6.0f} MiB  "
            f"{_latency(o.probes):<36}{o.reason[:90]}"
        )
    failed = sum(o.status == "failed" for o in outcomes)
    worst = max(outcomes, key=lambda o: percentile(o.probes.latencies or [0.0], 95))
    print(
        f"  {failed} of {len(outcomes)} failed, {len(outcomes) - failed} read; peak RSS over all:"
        f" API {max(o.peak_api for o in outcomes) / MIB:.0f} MiB, workers "
        f"{max(o.peak_workers for o in outcomes) / MIB:.0f} MiB; at the end API "
        f"{api_end / MIB:.0f} MiB, workers {workers_end / MIB:.0f} MiB"
    )
    print(f"  worst /healthz p95 during a file: {worst.name}, {_latency(worst.probes)}")
    print("  (worker RSS is the sum over the server's child processes; latency: a shared machine)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--api-port", type=int, default=0, help="0: a free one")
    parser.add_argument("--redis-port", type=int, default=0, help="0: a free one")
    parser.add_argument("--baseline", type=float, default=8.0, help="seconds unattacked")
    parser.add_argument("--only", default="", help="only the files whose name holds this")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="tl-hostile-"))
    processes: list[subprocess.Popen[bytes]] = []
    try:
        redis_port = args.redis_port or free_port()
        api_port = args.api_port or free_port()
        redis = shutil.which("redis-server") or "redis-server"
        processes.append(
            _start(
                [redis, "--port", str(redis_port), *NO_DISK, "--dir", str(root)],
                dict(os.environ),
                root / "redis.log",
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
                "THREADLINE_LOG_LEVEL": "WARNING",
                **UNLIMITED,
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
            asyncio.run(_bench(base, psutil.Process(api.pid), args))
            _stop(api)
    finally:
        for process in reversed(processes):
            _stop(process)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
