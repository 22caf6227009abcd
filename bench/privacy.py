"""Data rights at scale: export memory and time, erasure time, audit query latency.

    python -m bench.privacy [--audit-turns 1000000]

Starts PostgreSQL (embedded, or $BENCH_DATABASE_URL), generates the rows with SQL (as the
owner, fast), and measures through the product's own code as the application role (RLS on):
  * GET /me/export's generator: peak Python memory (tracemalloc) and time for 100, 1,000 and
    10,000 turns — the 100-turn export is the baseline; memory must not grow with the history;
  * erasure (one transaction, then the Redis scan) of a user with 10,000 turns beside one
    with 100;
  * the admin audit's first page (50 turns) p50/p95 over a tenant of `--audit-turns` turns,
    for each filter of SPEC §6, beside the unfiltered page (baseline).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import time
import tracemalloc
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from bench.common import bench_database, percentile

METADATA = (
    "jsonb_build_object('query_composition', comp, 'composition_confidence', 0.8, "
    "'token_budget', 6000, 'token_count', 1800 + (i % 900), "
    "'truncation_applied', (i % 10 = 0), "
    "'source_distribution', jsonb_build_object('kb', 900, 'attachment', 300, 'history', 600), "
    "'quality_score', round(((i * 7919) % 1000) / 1000.0, 3), "
    "'sources', jsonb_build_array(jsonb_build_object('id', md5(i::text), 'kind', 'kb', "
    "'score', 0.5, 'tokens', 400)), 'history_turns_included', 5, "
    "'reformulated_query', 'What does the contract say about item ' || i, "
    "'active_attachment_ids', '[]'::jsonb)"
)
COMPOSITIONS = "(ARRAY['pure_kb','pure_doc','hybrid','chat'])[1 + (i % 4)]"


async def _tenant_with_user(owner: AsyncEngine, sessions: int) -> tuple[uuid.UUID, uuid.UUID]:
    tenant, user = uuid.uuid4(), uuid.uuid4()
    async with owner.begin() as c:
        await c.execute(
            text("INSERT INTO tenants (id, name) VALUES (:t, :n)"),
            {"t": tenant, "n": f"bench-{tenant.hex[:8]}"},
        )
        await c.execute(
            text(
                "INSERT INTO users (tenant_id, id, email, password_hash, role) "
                "VALUES (:t, :u, :e, 'x', 'member')"
            ),
            {"t": tenant, "u": user, "e": f"{user.hex[:8]}@bench.example"},
        )
        await c.execute(
            text(
                "INSERT INTO chat_sessions (tenant_id, id, user_id, title) "
                "SELECT :t, gen_random_uuid(), :u, 'Session ' || s FROM generate_series(1, :n) s"
            ),
            {"t": tenant, "u": user, "n": sessions},
        )
    return tenant, user


async def _add_turns(
    owner: AsyncEngine, tenant: uuid.UUID, user: uuid.UUID | None, turns: int, span_days: int
) -> None:
    """`turns` turns spread over the tenant's sessions (of `user`, or of anyone), over
    `span_days` days, with realistic context metadata."""
    who = "AND user_id = :u" if user else ""
    async with owner.begin() as c:
        await c.execute(
            text(
                "WITH s AS (SELECT id, user_id, row_number() OVER () - 1 AS k, "
                "count(*) OVER () AS n "
                f"FROM chat_sessions WHERE tenant_id = :t {who}) "
                "INSERT INTO query_history (tenant_id, id, session_id, user_id, user_query, "
                "answer, status, query_composition, context_metadata, created_at) "
                "SELECT :t, gen_random_uuid(), s.id, s.user_id, "
                "'What does the contract say about item ' || i || '? ' "
                "|| repeat('more words ', 20), "
                "'The contract says item ' || i || ' is due [1]. ' || repeat('answer text ', 40), "
                f"'complete', comp, {METADATA}, "
                "now() - make_interval(secs => (i::float / :turns) * :span * 86400) "
                f"FROM (SELECT i, {COMPOSITIONS} AS comp FROM generate_series(1, :turns) i) g "
                "JOIN s ON s.k = g.i % s.n"
            ),
            {"t": tenant, "u": user, "turns": turns, "span": span_days},
        )


async def _add_checkpoints(owner: AsyncEngine, tenant: uuid.UUID, user: uuid.UUID) -> None:
    """Three checkpoints with blobs per session, as the pruned saver leaves them."""
    async with owner.begin() as c:
        await c.execute(
            text(
                "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, checkpoint, "
                "tenant_id) SELECT s.id::text, '', 'c' || k, "
                "jsonb_build_object('ts', now()::text, 'channel_versions', '{}'::jsonb), :t "
                "FROM chat_sessions s, generate_series(1, 3) k WHERE s.user_id = :u"
            ),
            {"t": tenant, "u": user},
        )
        await c.execute(
            text(
                "INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, "
                "blob, tenant_id) SELECT s.id::text, '', 'ch' || k, '1', 'msgpack', "
                "convert_to(repeat('x', 400), 'UTF8'), :t "
                "FROM chat_sessions s, generate_series(1, 30) k WHERE s.user_id = :u"
            ),
            {"t": tenant, "u": user},
        )


async def _export(
    sessions: async_sessionmaker[AsyncSession],
    tenant: uuid.UUID,
    user: uuid.UUID,
    batch: int,
    trace: bool,
) -> tuple[float, float, int]:
    """(peak MiB of Python allocations if traced, seconds, bytes produced). Time is taken on
    untraced runs: tracemalloc slows allocation-heavy code several times."""
    from app.privacy.export import export_user

    if trace:
        tracemalloc.start()
        tracemalloc.reset_peak()
    started = time.perf_counter()
    size = 0
    async for piece in export_user(sessions, tenant, user, batch_rows=batch):
        size += len(piece)
    seconds = time.perf_counter() - started
    peak = 0
    if trace:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak / 2**20, seconds, size


async def _erase(
    sessions: async_sessionmaker[AsyncSession], redis: Any, tenant: uuid.UUID, user: uuid.UUID
) -> tuple[float, dict[str, int]]:
    from app.core.db import scope_to_tenant
    from app.privacy.erasure import erase_user, purge_cache_keys

    started = time.perf_counter()
    async with sessions() as db:
        await scope_to_tenant(db, tenant)
        async with db.begin():
            erased = await erase_user(db, tenant, user)
    erased.cache_keys = await purge_cache_keys(redis, erased.ids)
    return time.perf_counter() - started, erased.counts()


async def _audit_case(
    sessions: async_sessionmaker[AsyncSession],
    tenant: uuid.UUID,
    make_filters: Any,
    runs: int,
) -> list[float]:
    from app.conversation.repository import TurnRepository
    from app.core.db import scope_to_tenant

    latencies = []
    for _ in range(runs):
        filters = make_filters()
        async with sessions() as db:
            await scope_to_tenant(db, tenant)
            async with db.begin():
                started = time.perf_counter()
                await TurnRepository(db, tenant).audit_page(filters, limit=50, after=None)
                latencies.append((time.perf_counter() - started) * 1000)
    return latencies


async def _run(owner_url: str, audit_turns: int, export_batch: int | None) -> None:
    from app.config import Settings
    from app.conversation.turn.filters import TurnFilters
    from app.core import migrate
    from app.core.database_urls import resolve_database_urls
    from app.core.db import create_engine, create_sessionmaker
    from app.core.redis import build_redis

    settings = Settings(
        database_url=owner_url, redis_url=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15")
    )
    urls = resolve_database_urls(settings)
    await migrate.upgrade(settings, urls.owner)
    owner = create_engine(urls.owner)
    app = create_engine(urls.app)
    sessions = create_sessionmaker(app)
    try:
        redis = build_redis(settings.model_copy(update={"redis_prefix": "tl-bench-privacy:"}))
        await redis.client.ping()
    except Exception:
        redis = build_redis(settings.model_copy(update={"redis_url": None}))

    batch = export_batch or settings.export_batch_rows
    print(f"\nGET /me/export (streamed, batches of {batch}; peak = Python allocations)")
    users: dict[int, tuple[uuid.UUID, uuid.UUID]] = {}
    for n in (100, 1_000, 10_000):
        users[n] = await _tenant_with_user(owner, sessions=max(1, n // 100))
        await _add_turns(owner, *users[n], turns=n, span_days=30)
    results = {}
    for n in (100, 1_000, 10_000):
        await _export(sessions, *users[n], batch, trace=False)  # warm-up
        traced = [await _export(sessions, *users[n], batch, trace=True) for _ in range(2)]
        timed = [await _export(sessions, *users[n], batch, trace=False) for _ in range(3)]
        results[n] = (
            statistics.median(r[0] for r in traced),
            statistics.median(r[1] for r in timed),
            timed[0][2],
        )
    base_peak, base_s, _ = results[100]
    for n, (peak, seconds, size) in results.items():
        label = (
            "baseline"
            if n == 100
            else f"{peak / base_peak:4.2f}x memory, {seconds / base_s:5.1f}x time"
        )
        print(
            f"  {n:>6} turns  peak {peak:6.2f} MiB  time {seconds * 1000:8.1f} ms  "
            f"{size / 2**20:6.1f} MiB of JSON   ({label})"
        )

    print("\nErasure (DB transaction + Redis key scan): 100 turns (baseline) vs 10,000")
    timings = {}
    for n in (100, 10_000):
        tenant, user = await _tenant_with_user(owner, sessions=max(1, n // 100))
        await _add_turns(owner, tenant, user, turns=n, span_days=30)
        await _add_checkpoints(owner, tenant, user)
        seconds, counts = await _erase(sessions, redis, tenant, user)
        timings[n] = seconds
        print(f"  {n:>6} turns  {seconds * 1000:8.1f} ms   {counts}")
    print(f"  ratio {timings[10_000] / timings[100]:.1f}x for 100x the turns")

    if audit_turns <= 0:
        return await _close(redis, app, owner)
    print(f"\nAdmin audit, first page of 50, over one tenant of {audit_turns:,} turns")
    tenant, _ = await _tenant_with_user(owner, sessions=1)
    async with owner.begin() as c:  # 200 more users with 5 sessions each
        await c.execute(
            text(
                "INSERT INTO users (tenant_id, id, email, password_hash, role) "
                "SELECT :t, gen_random_uuid(), 'u' || i || '@bench.example', 'x', 'member' "
                "FROM generate_series(1, 200) i"
            ),
            {"t": tenant},
        )
        await c.execute(
            text(
                "INSERT INTO chat_sessions (tenant_id, id, user_id, title) "
                "SELECT :t, gen_random_uuid(), u.id, 's' FROM users u, generate_series(1, 5) "
                "WHERE u.tenant_id = :t"
            ),
            {"t": tenant},
        )
    started = time.perf_counter()
    batch = 100_000
    for done in range(0, audit_turns, batch):
        await _add_turns(owner, tenant, None, turns=min(batch, audit_turns - done), span_days=365)
    async with owner.begin() as c:
        await c.execute(text("ANALYZE query_history"))
    print(f"  (generated in {time.perf_counter() - started:.0f} s)")
    async with owner.connect() as c:
        user_ids = list(
            (
                await c.execute(text("SELECT id FROM users WHERE tenant_id = :t"), {"t": tenant})
            ).scalars()
        )
        session_ids = list(
            (
                await c.execute(
                    text("SELECT id FROM chat_sessions WHERE tenant_id = :t"), {"t": tenant}
                )
            ).scalars()
        )
    now = datetime.now(UTC)
    pick = random.Random(7)  # noqa: S311 - reproducible sampling of filter values
    cases: dict[str, Any] = {
        "no filter (baseline)": lambda: TurnFilters(),
        "user_id": lambda: TurnFilters(user_id=pick.choice(user_ids)),
        "session_id": lambda: TurnFilters(session_id=pick.choice(session_ids)),
        "since+until (1 week)": lambda: (
            lambda start: TurnFilters(since=start, until=start + timedelta(days=7))
        )(now - timedelta(days=pick.randint(8, 360))),
        "composition": lambda: TurnFilters(composition=pick.choice(["pure_kb", "hybrid", "chat"])),
        "min_quality 0.95": lambda: TurnFilters(min_quality=0.95),
        "max_quality 0.05": lambda: TurnFilters(max_quality=0.05),
        "truncated": lambda: TurnFilters(truncated=True),
        "user+composition+truncated": lambda: TurnFilters(
            user_id=pick.choice(user_ids), composition="hybrid", truncated=True
        ),
    }
    baseline = None
    for name, make in cases.items():
        await _audit_case(sessions, tenant, make, 3)  # warm-up
        latencies = await _audit_case(sessions, tenant, make, 40)
        p95 = percentile(latencies, 95)
        baseline = baseline or p95
        print(
            f"  {name:<28} p50 {statistics.median(latencies):7.2f} ms  p95 {p95:7.2f} ms"
            f"  ({p95 / baseline:4.1f}x baseline p95)"
        )
    await _close(redis, app, owner)


async def _close(redis: Any, app: AsyncEngine, owner: AsyncEngine) -> None:
    await redis.close()
    await app.dispose()
    await owner.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--audit-turns", type=int, default=1_000_000, help="0: skip")
    parser.add_argument("--export-batch", type=int, default=None, help="default: the setting")
    args = parser.parse_args()
    with bench_database() as owner_url:
        asyncio.run(_run(owner_url, args.audit_turns, args.export_batch))


if __name__ == "__main__":
    main()
