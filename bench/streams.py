"""SSE under load: 200 concurrent streams against one API process.

    python -m bench.streams

uvicorn with a fake model emitting 50 tokens at 20 ms intervals (one second per answer).
Prints errors, time to headers and to the first event (p50/p95) beside the same process's
/healthz latency under the same load (the baseline), RSS before and after, and the process's
open TCP connections, asyncio tasks and live runs before and after all streams ended; then
1,000 abrupt disconnects (no resume window) and the same counters before and after.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import httpx

from bench.chat_overhead import JWT_SECRET, PASSWORD, UNLIMITED, _prepare, _redis_url
from bench.common import bench_database, summary, uvicorn_server

STREAMS = 200
DISCONNECTS, DISCONNECT_CONCURRENCY = 1000, 50
PROBES = (
    "http_client_connections",
    "redis_connections",
    "other_tcp_connections",
    "open_files",
    "asyncio_tasks",
    "live_runs",
)


async def _one_stream(
    client: httpx.AsyncClient, session_id: str, headers_ms: list[float], first_ms: list[float]
) -> str | None:
    body = {"session_id": session_id, "message": f"Tell me something ({uuid.uuid4().hex[:4]})"}
    started = time.perf_counter()
    first_ms_seen = False
    try:
        async with client.stream("POST", "/chat/stream", json=body) as response:
            headers_ms.append((time.perf_counter() - started) * 1000)
            if response.status_code != 200:
                return f"HTTP {response.status_code}"
            raw = ""
            async for text in response.aiter_text():
                raw += text
                if not first_ms_seen and "event:" in raw:
                    first_ms_seen = True
                    first_ms.append((time.perf_counter() - started) * 1000)
        if "event: done" not in raw:
            return "no done event"
        return None
    except httpx.HTTPError as exc:
        return type(exc).__name__


async def _healthz_during(client: httpx.AsyncClient, until: asyncio.Event) -> list[float]:
    latencies: list[float] = []
    while not until.is_set():
        started = time.perf_counter()
        await client.get("/healthz")
        latencies.append((time.perf_counter() - started) * 1000)
        await asyncio.sleep(0.05)
    return latencies


async def _bench(base: str) -> None:
    limits = httpx.Limits(max_connections=STREAMS + 10, max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as client:
        token = await client.post(
            "/auth/token", json={"email": "bench@example.com", "password": PASSWORD}
        )
        client.headers["Authorization"] = f"Bearer {token.json()['access_token']}"
        sessions = [
            (await client.post("/sessions", json={"title": f"s{i}"})).json()["id"]
            for i in range(STREAMS)
        ]
        await asyncio.gather(*(_one_stream(client, s, [], []) for s in sessions[:5]))  # warm-up
        await asyncio.sleep(0.5)
        before = (await client.get("/bench/process")).json()

        headers_ms: list[float] = []
        first_ms: list[float] = []
        finished = asyncio.Event()
        probe = asyncio.create_task(_healthz_during(client, finished))
        started = time.perf_counter()
        errors = await asyncio.gather(
            *(_one_stream(client, s, headers_ms, first_ms) for s in sessions)
        )
        wall = time.perf_counter() - started
        finished.set()
        healthz_ms = await probe
        await asyncio.sleep(1.0)
        after = (await client.get("/bench/process")).json()

    failed = [e for e in errors if e is not None]
    print(f"\n{STREAMS} concurrent SSE streams, 50 tokens at 20 ms each (one uvicorn process)")
    print(f"  errors                 {len(failed)}  {sorted(set(failed))}")
    print(f"  wall time              {wall:.2f} s")
    print(f"  time to headers        {summary(headers_ms)}")
    print(f"  time to first event    {summary(first_ms)}")
    print(f"  baseline /healthz      {summary(healthz_ms)}   (same process, during the load)")
    mib = 1024 * 1024
    print(
        f"  RSS                    before {before['rss_bytes'] / mib:.0f} MiB   "
        f"after {after['rss_bytes'] / mib:.0f} MiB"
    )
    for name in PROBES:
        print(f"  {name:<22} before {before[name]}   after {after[name]}")


async def _cut_after_first_token(client: httpx.AsyncClient, session_id: str) -> None:
    body = {"session_id": session_id, "message": "Tell me something"}
    async with client.stream("POST", "/chat/stream", json=body) as response:
        async for text in response.aiter_text():
            if "event: token" in text:
                break  # leaving the block closes the connection: an abrupt disconnect


async def _disconnects(base: str) -> None:
    """Abrupt disconnects with no resume window: every run is cancelled mid-answer."""
    limits = httpx.Limits(max_connections=DISCONNECT_CONCURRENCY, max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as client:
        token = await client.post(
            "/auth/token", json={"email": "bench@example.com", "password": PASSWORD}
        )
        client.headers["Authorization"] = f"Bearer {token.json()['access_token']}"
        sessions = [
            (await client.post("/sessions", json={"title": f"d{i}"})).json()["id"]
            for i in range(DISCONNECT_CONCURRENCY)
        ]
        await asyncio.gather(*(_cut_after_first_token(client, s) for s in sessions[:5]))
        await asyncio.sleep(1.0)
        before = (await client.get("/bench/process")).json()
        started = time.perf_counter()
        for _ in range(DISCONNECTS // DISCONNECT_CONCURRENCY):
            await asyncio.gather(*(_cut_after_first_token(client, s) for s in sessions))
        wall = time.perf_counter() - started
        await asyncio.sleep(2.0)
        after = (await client.get("/bench/process")).json()
    print(
        f"\n{DISCONNECTS} abrupt disconnects after the first token, {DISCONNECT_CONCURRENCY} "
        f"at a time ({wall:.1f} s)"
    )
    for name in PROBES:
        print(f"  {name:<22} before {before[name]}   after {after[name]}")
    mib = 1024 * 1024
    print(
        f"  RSS                    before {before['rss_bytes'] / mib:.0f} MiB   "
        f"after {after['rss_bytes'] / mib:.0f} MiB"
    )


def main() -> None:
    redis_url = _redis_url()
    with bench_database() as owner_url:
        asyncio.run(_prepare(owner_url))
        env = {
            "DATABASE_URL": owner_url,
            "THREADLINE_JWT_SECRET": JWT_SECRET,
            "THREADLINE_LOG_LEVEL": "WARNING",
            **UNLIMITED,
            **({"REDIS_URL": redis_url} if redis_url else {}),
        }
        with uvicorn_server(env, app="bench.bench_app:streaming_factory") as base:
            asyncio.run(_bench(base))
        no_grace = {**env, "THREADLINE_SSE_RESUME_GRACE_SECONDS": "0"}
        with uvicorn_server(no_grace, app="bench.bench_app:streaming_factory") as base:
            asyncio.run(_disconnects(base))


if __name__ == "__main__":
    main()
