"""Does a large upload stall the API? /healthz latency and memory while 24 MB files ingest.

    python -m bench.upload_stall [--uploads 3] [--mib 24] [--workers N]

One uvicorn process on loopback (embedded PostgreSQL unless $BENCH_DATABASE_URL, Redis if one
answers). First a baseline: /healthz alone for 10 s. Then `--uploads` distinct text files of
`--mib` MiB each (SciFact abstracts with e-mail addresses and phone numbers, so anonymising
has work) are uploaded as attachments at once, and polled until they are `ready` or
`failed`. /healthz is probed open-loop every 20 ms throughout, each probe on its own
connection, so a stalled event loop shows as every probe sent during the stall being slow,
not as one slow probe; each probe is a bare HTTP/1.1 request, so the bench's own CPU stays
small beside the server's. Printed: /healthz p50/p95/max with and without the uploads,
upload and ingestion times, and the RSS of the API process (and of its worker processes) before,
at the peak and 10 s after. Target: /healthz p95 < 100 ms during the uploads.

`--workers` sets THREADLINE_INGEST_WORKERS (0: a thread of the API process).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil

from bench.chat_overhead import JWT_SECRET, PASSWORD, UNLIMITED, _prepare, _redis_url
from bench.common import ROOT, bench_database, percentile, uvicorn_server

# The shared data sits beside the checkout (or beside the worktrees' folder).
CORPUS = next(
    (
        path
        for path in (
            Path(os.environ.get("BENCH_CORPUS", "/nonexistent")),
            *(p / "shared" / "data" / "scifact-dev" / "corpus.jsonl" for p in ROOT.parents),
        )
        if path.is_file()
    ),
    Path("corpus.jsonl"),
)
PROBE_EVERY = 0.02
BASELINE_SECONDS = 10.0
SETTLE_SECONDS = 10.0
INGEST_TIMEOUT = 1800.0
MIB = 1024 * 1024


def make_text(index: int, size: int) -> bytes:
    """About `size` bytes of prose with personal data, different for each `index`."""
    abstracts = []
    with CORPUS.open() as corpus:
        for line in corpus:
            doc = json.loads(line)
            abstracts.append(f"{doc['title']}\n\n{doc['text']}")
    parts, total, i = [], 0, 0
    while total < size:
        part = (
            f"{abstracts[i % len(abstracts)]} Contact author{index}.{i}@example.org "
            f"or +39 333 {index:03d} {i % 10000:04d}.\n\n"
        ).encode()
        parts.append(part)
        total += len(part)
        i += 1
    return b"".join(parts)[:size]


@dataclass
class Probes:
    latencies: list[float] = field(default_factory=list)
    errors: int = 0

    def line(self) -> str:
        if not self.latencies:
            return "no probes"
        values = self.latencies
        return (
            f"p50 {statistics.median(values):7.1f} ms   p95 {percentile(values, 95):7.1f} ms   "
            f"max {max(values):7.1f} ms   (n={len(values)}, errors {self.errors})"
        )


async def _probe(base: str, probes: Probes) -> None:
    """GET /healthz on a new loopback connection, by hand: an HTTP client library costs
    the bench more CPU per request than the server spends answering it."""
    host, port = base.removeprefix("http://").split(":")
    started = time.perf_counter()
    try:
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(f"GET /healthz HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        answer = await reader.read()
        writer.close()
        if not answer.startswith(b"HTTP/1.1 200"):
            raise OSError(answer[:40])
        probes.latencies.append((time.perf_counter() - started) * 1000)
    except OSError:
        probes.errors += 1


async def _probe_until(base: str, stop: asyncio.Event, probes: Probes) -> None:
    """Fire a probe every PROBE_EVERY seconds, whether or not the previous ones answered
    (open loop: a stall delays every probe sent during it, as it would real clients)."""
    pending: set[asyncio.Task[None]] = set()
    while not stop.is_set():
        task = asyncio.create_task(_probe(base, probes))
        pending.add(task)
        task.add_done_callback(pending.discard)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), PROBE_EVERY)
    await asyncio.gather(*pending)


@dataclass
class Memory:
    server: psutil.Process
    peak_api: int = 0
    peak_workers: int = 0

    def sample(self) -> tuple[int, int]:
        api = self.server.memory_info().rss
        workers = 0
        for child in self.server.children(recursive=True):
            with contextlib.suppress(psutil.NoSuchProcess):
                workers += child.memory_info().rss
        self.peak_api, self.peak_workers = max(self.peak_api, api), max(self.peak_workers, workers)
        return api, workers


async def _watch_memory(memory: Memory, stop: asyncio.Event) -> None:
    while not stop.is_set():
        memory.sample()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.1)


def _server_process(base: str) -> psutil.Process:
    port = int(base.rsplit(":", 1)[1])
    for connection in psutil.net_connections("tcp"):
        address = connection.laddr
        if connection.status == "LISTEN" and address and address.port == port and connection.pid:
            return psutil.Process(connection.pid)
    raise RuntimeError(f"no process listens on {port}")


async def _upload(
    client: httpx.AsyncClient, name: str, data: bytes
) -> tuple[str | None, float, str]:
    started = time.perf_counter()
    response = await client.post("/attachments", files={"file": (name, data, "text/plain")})
    seconds = time.perf_counter() - started
    if response.status_code not in (200, 201):
        return None, seconds, f"HTTP {response.status_code} {response.text[:200]}"
    return str(response.json()["id"]), seconds, "uploaded"


async def _until_done(client: httpx.AsyncClient, attachment: str) -> tuple[str, str | None]:
    deadline = time.monotonic() + INGEST_TIMEOUT
    while time.monotonic() < deadline:
        response = await client.get(f"/attachments/{attachment}")
        body = response.json()
        if response.status_code != 200:
            return f"HTTP {response.status_code}", str(body)
        if body["status"] in ("ready", "failed"):
            return body["status"], body.get("error")
        await asyncio.sleep(0.5)
    return "timeout", None


async def _refused() -> tuple[str, str | None]:
    return "not ingested", None


async def _bench(base: str, files: list[bytes]) -> None:
    memory = Memory(_server_process(base))
    async with httpx.AsyncClient(base_url=base, timeout=600) as client:
        token = await client.post(
            "/auth/token", json={"email": "bench@example.com", "password": PASSWORD}
        )
        client.headers["Authorization"] = f"Bearer {token.json()['access_token']}"
        warm = await client.post("/attachments", files={"file": ("w.txt", make_text(99, 40_000))})
        await _until_done(client, warm.json()["id"])  # starts the worker pool, if any
        await asyncio.sleep(1.0)
        api_before, workers_before = memory.sample()

        baseline, stop = Probes(), asyncio.Event()
        probing = asyncio.create_task(_probe_until(base, stop, baseline))
        await asyncio.sleep(BASELINE_SECONDS)
        stop.set()
        await probing

        loaded, stop = Probes(), asyncio.Event()
        memory.peak_api, memory.peak_workers = api_before, workers_before
        watching = asyncio.create_task(_watch_memory(memory, stop))
        probing = asyncio.create_task(_probe_until(base, stop, loaded))
        started = time.perf_counter()
        uploads = await asyncio.gather(
            *(_upload(client, f"big{i}.txt", data) for i, data in enumerate(files))
        )
        uploaded = time.perf_counter() - started
        outcomes = await asyncio.gather(
            *(_until_done(client, a) if a else _refused() for a, _, _ in uploads)
        )
        ingested = time.perf_counter() - started
        stop.set()
        await asyncio.gather(probing, watching)
        await asyncio.sleep(SETTLE_SECONDS)
        api_after, workers_after = memory.sample()

    sizes = ", ".join(f"{len(data) / MIB:.1f}" for data in files)
    print(f"\n{len(files)} text attachments uploaded at once ({sizes} MiB), one uvicorn process")
    print(f"  /healthz, no uploads        {baseline.line()}")
    print(f"  /healthz, during uploads    {loaded.line()}")
    for (_, seconds, note), (status, error) in zip(uploads, outcomes, strict=True):
        print(f"  upload answered in {seconds:6.2f} s: {note} -> {status} {error or ''}")
    print(f"  all answered in {uploaded:.1f} s; all ingested in {ingested:.1f} s")
    print(
        f"  RSS, API process            before {api_before / MIB:6.0f} MiB   peak "
        f"{memory.peak_api / MIB:6.0f} MiB   {SETTLE_SECONDS:.0f} s after "
        f"{api_after / MIB:6.0f} MiB"
    )
    print(
        f"  RSS, its worker processes   before {workers_before / MIB:6.0f} MiB   peak "
        f"{memory.peak_workers / MIB:6.0f} MiB   {SETTLE_SECONDS:.0f} s after "
        f"{workers_after / MIB:6.0f} MiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--uploads", type=int, default=3)
    parser.add_argument("--mib", type=float, default=24.0)
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args()
    files = [make_text(i, int(args.mib * MIB)) for i in range(args.uploads)]
    redis_url = _redis_url()
    with bench_database() as owner_url:
        asyncio.run(_prepare(owner_url))
        env = {
            "DATABASE_URL": owner_url,
            "THREADLINE_JWT_SECRET": JWT_SECRET,
            "THREADLINE_LOG_LEVEL": "WARNING",
            "THREADLINE_ACCESS_TOKEN_TTL_SECONDS": "86400",  # a slow machine outlives 15 min
            **UNLIMITED,
            **({"REDIS_URL": redis_url} if redis_url else {}),
        }
        if args.workers is not None:
            env["THREADLINE_INGEST_WORKERS"] = str(args.workers)
        with uvicorn_server(env) as base:
            asyncio.run(_bench(base, files))
    workers = env.get("THREADLINE_INGEST_WORKERS", "default")
    print(f"  (THREADLINE_INGEST_WORKERS: {workers})")


if __name__ == "__main__":
    main()
