"""Non-LLM overhead of a chat turn over real HTTP, and history load times.

    python -m bench.chat_overhead            (or: make bench)

Starts PostgreSQL (embedded, or $BENCH_DATABASE_URL) and uvicorn with a zero-latency fake
model, then measures in the same run:
  * the baseline: POST /bench/baseline — authenticate, read the session, write one row;
  * POST /chat — the whole nine-node pipeline with checkpointing;
at 1 and 32 concurrent sessions (p50/p95, and the ratio to the baseline), each node's share
of a turn (from /chat/stream's `done` event), and history load p95 for a 50-turn session from
the Redis cache and from PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
import uuid
from collections import defaultdict

import httpx

from bench.common import bench_database, percentile, summary, uvicorn_server

JWT_SECRET = "bench-secret-" + "x" * 40
PASSWORD = "bench password 1"
REQUESTS_PER_SESSION = {1: 300, 32: 12}
# One bench user sends hundreds of turns a minute: lift the rate limits and quotas (0 = none).
UNLIMITED = {
    f"THREADLINE_{name}": "0"
    for name in (
        "RATE_LIMIT_USER_PER_MIN",
        "RATE_LIMIT_TENANT_PER_MIN",
        "TOKEN_QUOTA_USER_PER_DAY",
        "TOKEN_QUOTA_TENANT_PER_DAY",
        "MAX_IN_FLIGHT_PER_CREDENTIAL",  # one bench user drives many concurrent streams
    )
}


def _redis_url() -> str | None:
    url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15")
    import redis

    try:
        redis.Redis.from_url(url, socket_connect_timeout=1).ping()
        return url
    except redis.RedisError:
        return None


async def _prepare(owner_url: str) -> None:
    from app.auth.service import create_user
    from app.config import Settings
    from app.core import migrate
    from app.core.database_urls import resolve_database_urls
    from app.core.db import create_engine, create_sessionmaker, scope_to_tenant
    from app.tenants.service import create_tenant

    settings = Settings(database_url=owner_url)
    urls = resolve_database_urls(settings)
    await migrate.upgrade(settings, urls.owner)
    engine = create_engine(urls.app)
    async with create_sessionmaker(engine)() as db, db.begin():
        tenant = await create_tenant(db, f"bench-{uuid.uuid4().hex[:6]}")
        await scope_to_tenant(db, tenant.id)
        await create_user(
            db,
            settings,
            tenant.id,
            email="bench@example.com",
            password=PASSWORD,
            role="admin",
        )
    await engine.dispose()


async def _measure(
    client: httpx.AsyncClient,
    path: str,
    sessions: list[str],
    per_session: int,
    pause: float = 0.0,
) -> list[float]:
    latencies: list[float] = []

    async def worker(session_id: str) -> None:
        for i in range(per_session):
            body = {"session_id": session_id, "message": f"What does Threadline do? ({i})"}
            started = time.perf_counter()
            response = await client.post(path, json=body)
            latencies.append((time.perf_counter() - started) * 1000)
            await asyncio.sleep(pause)
            if response.status_code != 200:
                raise RuntimeError(f"{path}: {response.status_code} {response.text[:200]}")

    await asyncio.gather(*(worker(s) for s in sessions))
    return latencies


async def _node_shares(client: httpx.AsyncClient, session_id: str, turns: int) -> dict[str, float]:
    """Share of the server-side turn time spent inside each node; the remainder is the
    framework (LangGraph, checkpointer, HTTP handling)."""
    totals: dict[str, float] = defaultdict(float)
    whole = 0.0
    for _ in range(turns):
        body = {"session_id": session_id, "message": "How are answers streamed?"}
        async with client.stream("POST", "/chat/stream", json=body) as response:
            raw = (await response.aread()).decode()
        done = next(b for b in raw.split("\n\n") if "event: done" in b)
        data = json.loads(done.split("data: ", 1)[1])
        for node, ms in data["node_ms"].items():
            totals[node] += ms
        whole += data["turn_ms"]
    totals["(framework, checkpointer, request)"] = whole - sum(totals.values())
    return {node: 100 * ms / whole for node, ms in totals.items()}


async def _http_bench(base: str) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        token = await client.post(
            "/auth/token", json={"email": "bench@example.com", "password": PASSWORD}
        )
        client.headers["Authorization"] = f"Bearer {token.json()['access_token']}"
        sessions = [
            (await client.post("/sessions", json={"title": f"s{i}"})).json()["id"]
            for i in range(32)
        ]
        # The baseline writes its rows into sessions of its own: a turn written behind the
        # product's back into a /chat session would leave that session's history cache stale,
        # and every /chat turn after it would rebuild its history from PostgreSQL — a cost no
        # real turn pays (every finished turn goes through persist, which refreshes the cache).
        baseline_sessions = [
            (await client.post("/sessions", json={"title": f"b{i}"})).json()["id"]
            for i in range(32)
        ]
        await _measure(client, "/bench/baseline", baseline_sessions[:4], 10)  # warm-up
        await _measure(client, "/chat", sessions[:4], 10)

        print("\nNon-LLM overhead of a turn over HTTP (uvicorn, zero-latency fake model)")
        for concurrency, per_session in REQUESTS_PER_SESSION.items():
            chosen, chosen_baseline = sessions[:concurrency], baseline_sessions[:concurrency]
            base_ms: list[float] = []
            chat_ms: list[float] = []
            # Interleaved in short blocks (one request each with one session), so the drift of
            # a shared machine affects both alike. With one session each request starts on an
            # idle server (a pause after each, not timed): work a turn does after its answer
            # (the checkpoint write) must not land on the next request, least of all on a
            # baseline request that would then carry /chat's cost.
            block, pause = (1, 0.05) if concurrency == 1 else (3, 0.0)
            for _ in range(per_session // block):
                base_ms += await _measure(client, "/bench/baseline", chosen_baseline, block, pause)
                chat_ms += await _measure(client, "/chat", chosen, block, pause)
            ratio50 = statistics.median(chat_ms) / statistics.median(base_ms)
            ratio95 = percentile(chat_ms, 95) / percentile(base_ms, 95)
            print(f"  {concurrency:>2} concurrent  baseline  {summary(base_ms)}")
            print(f"  {concurrency:>2} concurrent  /chat     {summary(chat_ms)}")
            print(
                f"  {concurrency:>2} concurrent  ratio     p50 {ratio50:.2f}x   p95 {ratio95:.2f}x"
            )

        shares = await _node_shares(client, sessions[0], 40)
        print("\nShare of a turn per node (/chat/stream, 40 turns)")
        for node, share in sorted(shares.items(), key=lambda kv: -kv[1]):
            print(f"  {node:<20} {share:5.1f} %")


async def _history_bench(owner_url: str, redis_url: str | None) -> None:
    from app.config import Settings
    from app.conversation.history import HistoryStore
    from app.core.database_urls import resolve_database_urls
    from app.core.db import create_engine, create_sessionmaker, scope_to_tenant
    from app.core.redis import build_redis
    from app.models import ChatSession, QueryHistory, Tenant, User

    settings = Settings(database_url=owner_url, redis_url=redis_url, history_turns=50)
    engine = create_engine(resolve_database_urls(settings).app)
    sessions = create_sessionmaker(engine)
    tenant_id, user_id, session_id = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    async with sessions() as db, db.begin():
        await scope_to_tenant(db, tenant_id)
        db.add(Tenant(id=tenant_id, name=f"history-{tenant_id.hex[:6]}", settings={}))
        await db.flush()
        db.add(
            User(tenant_id=tenant_id, id=user_id, email="h@x.io", password_hash="x", role="member")
        )
        await db.flush()
        db.add(ChatSession(tenant_id=tenant_id, id=session_id, user_id=user_id, title="h"))
        await db.flush()
        for i in range(50):
            db.add(
                QueryHistory(
                    tenant_id=tenant_id,
                    session_id=session_id,
                    user_id=user_id,
                    user_query=f"Question {i} " * 8,
                    answer=f"Answer {i} " * 60,
                    status="complete",
                )
            )
    redis = build_redis(settings)
    store = HistoryStore(redis, limit=50, ttl_seconds=600)
    hits: list[float] = []
    misses: list[float] = []
    for _ in range(300):
        await redis.client.delete(store.key(tenant_id, session_id))
        async with sessions() as db, db.begin():
            await scope_to_tenant(db, tenant_id)
            started = time.perf_counter()
            snapshot, source = await store.load(db, tenant_id, session_id)
            misses.append((time.perf_counter() - started) * 1000)
            assert source == "database" and len(snapshot["turns"]) == 50
            started = time.perf_counter()
            snapshot, source = await store.load(db, tenant_id, session_id)
            hits.append((time.perf_counter() - started) * 1000)
            assert source == "cache" and len(snapshot["turns"]) == 50
    where = redis_url or "in-process stand-in"
    print(f"\nHistory load, 50-turn session (Redis: {where})")
    print(f"  cache hit            {summary(hits)}")
    print(f"  miss (PostgreSQL)    {summary(misses)}")
    await redis.close()
    await engine.dispose()


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
            asyncio.run(_http_bench(base))
        asyncio.run(_history_bench(owner_url, redis_url))


if __name__ == "__main__":
    main()
