"""Overhead of the OpenAI-compatible face over the native one, for the same turn.

    python -m bench.openai_overhead

Starts PostgreSQL (embedded, or $BENCH_DATABASE_URL) and uvicorn with the zero-latency fake
model (bench/bench_app.py), then, in one run, alternates request by request:
  * POST /chat against POST /v1/chat/completions (whole answers);
  * POST /chat/stream against POST /v1/chat/completions with `stream: true` (each timed until
    its stream ended: the `done` event, or `data: [DONE]`).
Both ask the same question in sessions of their own that grow alike (the /v1 request names
its session by X-Threadline-Session and sends the one user message, as /chat does). Prints
p50/p95 of each and the ratios /v1 over native; the target is a p95 within 10 %.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from collections.abc import Awaitable, Callable

import httpx

from bench.chat_overhead import JWT_SECRET, PASSWORD, UNLIMITED, _prepare, _redis_url
from bench.common import bench_database, percentile, summary, uvicorn_server

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "200"))
WARMUP = 20
PAUSE = 0.03  # after each request, untimed: a turn's post-answer work lands on no one
SESSIONS = 8  # per endpoint, used in turn: the history window fills alike on both sides
QUESTION = "What does Threadline do?"

Timed = Callable[[str, int], Awaitable[float]]


def _native(client: httpx.AsyncClient) -> Timed:
    async def call(session: str, _: int) -> float:
        started = time.perf_counter()
        response = await client.post("/chat", json={"session_id": session, "message": QUESTION})
        elapsed = (time.perf_counter() - started) * 1000
        assert response.status_code == 200, response.text[:200]
        return elapsed

    return call


def _completion(client: httpx.AsyncClient) -> Timed:
    async def call(session: str, _: int) -> float:
        body = {"model": "threadline", "messages": [{"role": "user", "content": QUESTION}]}
        started = time.perf_counter()
        response = await client.post(
            "/v1/chat/completions", json=body, headers={"X-Threadline-Session": session}
        )
        elapsed = (time.perf_counter() - started) * 1000
        assert response.status_code == 200, response.text[:200]
        return elapsed

    return call


def _native_stream(client: httpx.AsyncClient) -> Timed:
    async def call(session: str, _: int) -> float:
        body = {"session_id": session, "message": QUESTION}
        started = time.perf_counter()
        async with client.stream("POST", "/chat/stream", json=body) as response:
            raw = await response.aread()
        elapsed = (time.perf_counter() - started) * 1000
        assert response.status_code == 200 and b"event: done" in raw, raw[-200:]
        return elapsed

    return call


def _completion_stream(client: httpx.AsyncClient) -> Timed:
    async def call(session: str, _: int) -> float:
        body = {
            "model": "threadline",
            "messages": [{"role": "user", "content": QUESTION}],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        headers = {"X-Threadline-Session": session}
        started = time.perf_counter()
        async with client.stream(
            "POST", "/v1/chat/completions", json=body, headers=headers
        ) as response:
            raw = await response.aread()
        elapsed = (time.perf_counter() - started) * 1000
        assert response.status_code == 200 and raw.endswith(b"data: [DONE]\n\n"), raw[-200:]
        return elapsed

    return call


async def _pair(
    native: Timed, openai: Timed, native_sessions: list[str], openai_sessions: list[str]
) -> tuple[list[float], list[float]]:
    """Alternate the two, one request each per round; warm-up rounds are not kept."""
    native_ms: list[float] = []
    openai_ms: list[float] = []
    for i in range(WARMUP + ROUNDS):
        # Which goes first alternates too, so neither always follows the other's leftovers.
        order = [(native, native_sessions, native_ms), (openai, openai_sessions, openai_ms)]
        for call, sessions, kept in order if i % 2 == 0 else order[::-1]:
            elapsed = await call(sessions[i % SESSIONS], i)
            if i >= WARMUP:
                kept.append(elapsed)
            await asyncio.sleep(PAUSE)
    return native_ms, openai_ms


def _report(label: str, native_label: str, native_ms: list[float], openai_ms: list[float]) -> None:
    ratio50 = statistics.median(openai_ms) / statistics.median(native_ms)
    ratio95 = percentile(openai_ms, 95) / percentile(native_ms, 95)
    print(f"  {native_label:<34} {summary(native_ms)}")
    print(f"  {label:<34} {summary(openai_ms)}")
    print(f"  {'ratio /v1 over native':<34} p50 {ratio50:.3f}x   p95 {ratio95:.3f}x")


async def _bench(base: str) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        token = await client.post(
            "/auth/token", json={"email": "bench@example.com", "password": PASSWORD}
        )
        client.headers["Authorization"] = f"Bearer {token.json()['access_token']}"

        async def sessions(prefix: str) -> list[str]:
            made = [
                await client.post("/sessions", json={"title": f"{prefix}{i}"}) for i in range(8)
            ]
            return [str(r.json()["id"]) for r in made]

        print(f"\n/v1/chat/completions over the native API, same turn ({ROUNDS} each, alternated;")
        print("uvicorn, zero-latency fake model)")
        native, openai = await _pair(
            _native(client), _completion(client), await sessions("n"), await sessions("o")
        )
        _report("POST /v1/chat/completions", "POST /chat", native, openai)
        native, openai = await _pair(
            _native_stream(client),
            _completion_stream(client),
            await sessions("ns"),
            await sessions("os"),
        )
        _report("POST /v1/chat/completions stream", "POST /chat/stream", native, openai)


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
        with uvicorn_server(env) as base:
            asyncio.run(_bench(base))


if __name__ == "__main__":
    main()
