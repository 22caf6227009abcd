"""Does one member's hostile request slow everyone? /healthz beside issue 33's attacks.

    python -m bench.attacks [--seconds 10] [--resumes 300] [--guard-requests 3] [--pdfs 2]

One uvicorn process on loopback (embedded PostgreSQL unless $BENCH_DATABASE_URL; the Redis at
$REDIS_URL, else 127.0.0.1:6379/15, with a pool of 20), a model that streams 400 tokens over
20 s, and /healthz probed open-loop every 20 ms (each probe on its own connection, from a process of
its own: `bench.healthz_probe`) through every phase:

1. **unattacked**: the same process, nothing else running (the baseline, this run);
2. **guard** (issue 33, item 1): a member's `POST /chat` whose client-sent conversation is 29
   x [32,000 characters of "ignore previous ", "ok"] + a question (about 930 KB), sent
   `--guard-requests` at a time for `--seconds`;
3. **resume flood** (item 2): one slow turn, then `--resumes` concurrent
   `GET /chat/{turn}/stream` with `Last-Event-ID: 1`; meanwhile another tenant's `/chat`,
   a login, and 15 wrong passwords for a third account;
4. **PDF stall** (item 6): a member uploads `--pdfs` 7.9 KB PDFs whose 15 pages share one
   content stream of 100,000 text operations, as conversation attachments; a second later
   another tenant uploads a one-line text file. Both are followed until settled.

Printed per phase: /healthz p50/p95/max and p95 against the unattacked run; for the flood,
how the resumes were answered and what the other tenant, the login and the throttle got; for
the PDFs, how each upload ended and when the other tenant's file was ready.
Target (issue 33): /healthz p95 <= 100 ms in every phase.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import time
import uuid

import httpx

from app.config import Settings
from bench.chat_overhead import JWT_SECRET, PASSWORD, UNLIMITED, _redis_url
from bench.common import bench_database, uvicorn_server
from bench.healthz_probe import probing_apart
from bench.upload_stall import Probes

ATTACK = ("ignore previous " * 2001)[:32_000]
IN_FLIGHT_DEFAULT = Settings.model_fields["max_in_flight_per_credential"].default
PDF_TIMEOUT = 600.0
TENANTS = ("attacker", "bystander", "guessed")


async def _prepare(owner_url: str) -> None:
    """Three tenants, one user each (`<tenant>@example.com`)."""
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
        for name in TENANTS:
            tenant = await create_tenant(db, f"{name}-{uuid.uuid4().hex[:6]}")
            await scope_to_tenant(db, tenant.id)
            await create_user(
                db,
                settings,
                tenant.id,
                email=f"{name}@example.com",
                password=PASSWORD,
                role="member",
            )
    await engine.dispose()


async def _client(base: str, name: str) -> httpx.AsyncClient:
    client = httpx.AsyncClient(
        base_url=base, timeout=120, limits=httpx.Limits(max_connections=None)
    )
    token = await client.post(
        "/auth/token", json={"email": f"{name}@example.com", "password": PASSWORD}
    )
    client.headers["Authorization"] = f"Bearer {token.json()['access_token']}"
    return client


async def _session(client: httpx.AsyncClient) -> str:
    return str((await client.post("/sessions")).json()["id"])


async def _probed(base: str, attack: asyncio.Future[object] | None, seconds: float) -> Probes:
    """Probe /healthz while `attack` runs (or for `seconds` when there is none), from a
    process of its own: the flood's 300 clients stall this process's loop for up to 1 s."""
    async with probing_apart(base) as probes:
        if attack is None:
            await asyncio.sleep(seconds)
        else:
            await attack
    return probes


async def _guard_attack(client: httpx.AsyncClient, seconds: float, parallel: int) -> str:
    messages: list[dict[str, str]] = []
    for _ in range(29):
        messages += [{"role": "user", "content": ATTACK}, {"role": "assistant", "content": "ok"}]
    messages.append({"role": "user", "content": "Which office is in Turin?"})
    statuses: collections.Counter[int] = collections.Counter()
    durations: list[float] = []
    deadline = time.monotonic() + seconds

    async def one() -> None:
        while time.monotonic() < deadline:
            session = await _session(client)
            started = time.perf_counter()
            response = await client.post(
                "/chat", json={"session_id": session, "messages": messages}
            )
            durations.append(time.perf_counter() - started)
            statuses[response.status_code] += 1

    await asyncio.gather(*(one() for _ in range(parallel)))
    return (
        f"{sum(statuses.values())} requests {dict(statuses)}, each {max(durations):.1f} s at most"
    )


async def _flood(
    base: str, attacker: httpx.AsyncClient, bystander: httpx.AsyncClient, resumes: int
) -> list[str]:
    session = await _session(attacker)
    turn: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def stream() -> None:
        async with attacker.stream(
            "POST", "/chat/stream", json={"session_id": session, "message": "Go"}
        ) as response:
            turn.set_result(response.headers["x-turn-id"])
            async for _ in response.aiter_bytes():
                pass

    streaming = asyncio.create_task(stream())
    turn_id = await turn
    await asyncio.sleep(1.0)
    outcomes: collections.Counter[str] = collections.Counter()

    async def resume() -> None:
        try:
            async with attacker.stream(
                "GET", f"/chat/{turn_id}/stream", headers={"Last-Event-ID": "1"}
            ) as response:
                body = b"".join([chunk async for chunk in response.aiter_bytes()])
            refused = (b"too_many_streams", b"too_many_in_flight")
            code = next((c.decode() for c in refused if c in body), "followed")
            outcomes[f"{response.status_code} {code}"] += 1
        except httpx.HTTPError as exc:
            outcomes[type(exc).__name__] += 1

    flooding = [asyncio.create_task(resume()) for _ in range(resumes)]
    await asyncio.sleep(2.0)  # every resume is in: the pool would be gone by now
    other_session = await _session(bystander)
    started = time.perf_counter()
    other = await bystander.post(
        "/chat", json={"session_id": other_session, "message": "Hello, which office?"}
    )
    other_seconds = time.perf_counter() - started
    async with httpx.AsyncClient(base_url=base, timeout=60) as anonymous:
        started = time.perf_counter()
        login = await anonymous.post(
            "/auth/token", json={"email": "bystander@example.com", "password": PASSWORD}
        )
        login_seconds = time.perf_counter() - started
        guesses = [
            (
                await anonymous.post(
                    "/auth/token", json={"email": "guessed@example.com", "password": f"no-{i}"}
                )
            ).status_code
            for i in range(15)
        ]
    await asyncio.gather(*flooding)
    await streaming
    return [
        f"resumes: {dict(outcomes)}",
        f"another tenant's /chat: {other.status_code} in {other_seconds:.2f} s",
        f"a login: {login.status_code} in {login_seconds:.2f} s",
        f"15 wrong passwords: {dict(collections.Counter(guesses))}",
    ]


async def _pdf_stall(
    attacker: httpx.AsyncClient, bystander: httpx.AsyncClient, pdfs: int
) -> list[str]:
    from tests.knowledge.test_ingestion_budget import shared_stream_pdf

    hostile = shared_stream_pdf(15, 100_000)

    async def settle(client: httpx.AsyncClient, name: str, data: bytes, kind: str) -> str:
        started = time.perf_counter()
        uploaded = await client.post("/attachments", files={"file": (name, data, kind)})
        if uploaded.status_code not in (200, 201):
            return f"{name}: HTTP {uploaded.status_code}"
        attachment = uploaded.json()["id"]
        while time.perf_counter() - started < PDF_TIMEOUT:
            body = (await client.get(f"/attachments/{attachment}")).json()
            if body.get("status") in ("ready", "failed"):
                error = f" ({str(body.get('error'))[:60]})" if body.get("error") else ""
                return f"{name}: {body['status']} in {time.perf_counter() - started:.1f} s{error}"
            await asyncio.sleep(0.25)
        return f"{name}: not settled in {PDF_TIMEOUT:.0f} s"

    attacks = [
        asyncio.create_task(settle(attacker, f"report-{i}.pdf", hostile, "application/pdf"))
        for i in range(pdfs)
    ]
    await asyncio.sleep(1.0)  # the other tenant's file arrives while the PDFs are being read
    other = await settle(bystander, "note.txt", b"The Turin office opens at nine.", "text/plain")
    settled = await asyncio.gather(*attacks)
    return [
        f"{len(hostile) / 1024:.1f} KB PDFs: " + "; ".join(settled),
        f"another tenant's {other}",
    ]


def _line(name: str, probes: Probes, baseline: Probes) -> str:
    from bench.common import percentile

    ratio = percentile(probes.latencies, 95) / max(percentile(baseline.latencies, 95), 0.001)
    return f"  /healthz, {name:<13} {probes.line()}   p95 x{ratio:.1f}"


async def _bench(base: str, seconds: float, resumes: int, guard_requests: int, pdfs: int) -> None:
    attacker, bystander = await _client(base, "attacker"), await _client(base, "bystander")
    try:
        baseline = await _probed(base, None, seconds)
        guard_note: list[str] = []

        async def guard() -> None:
            guard_note.append(await _guard_attack(attacker, seconds, guard_requests))

        guarded = await _probed(base, asyncio.ensure_future(guard()), seconds)
        flood_notes: list[str] = []

        async def flood() -> None:
            flood_notes.extend(await _flood(base, attacker, bystander, resumes))

        flooded = await _probed(base, asyncio.ensure_future(flood()), seconds)
        pdf_notes: list[str] = []

        async def stall() -> None:
            pdf_notes.extend(await _pdf_stall(attacker, bystander, pdfs))

        stalled = await _probed(base, asyncio.ensure_future(stall()), seconds)
    finally:
        await attacker.aclose()
        await bystander.aclose()
    print("\nOne process under issue 33's attacks (target: /healthz p95 <= 100 ms)")
    print(_line("unattacked", baseline, baseline))
    print(_line("guard", guarded, baseline))
    print(f"    {guard_note[0]}")
    print(_line("resume flood", flooded, baseline))
    for note in flood_notes:
        print(f"    {note}")
    print(_line("PDF stall", stalled, baseline))
    for note in pdf_notes:
        print(f"    {note}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--resumes", type=int, default=300)
    parser.add_argument("--guard-requests", type=int, default=3)
    parser.add_argument("--pdfs", type=int, default=2)
    args = parser.parse_args()
    redis_url = _redis_url()
    with bench_database() as owner_url:
        asyncio.run(_prepare(owner_url))
        env = {
            "DATABASE_URL": owner_url,
            "THREADLINE_JWT_SECRET": JWT_SECRET,
            "THREADLINE_LOG_LEVEL": "WARNING",
            "THREADLINE_REDIS_MAX_CONNECTIONS": "20",
            # Counters of an earlier run (the login throttle's 15 minutes) must not carry over.
            "THREADLINE_REDIS_PREFIX": f"bench-attacks-{uuid.uuid4().hex[:8]}:",
            **UNLIMITED,
            # The defence under test keeps its default (quotas and rate limits do not).
            "THREADLINE_MAX_IN_FLIGHT_PER_CREDENTIAL": str(IN_FLIGHT_DEFAULT),
            **({"REDIS_URL": redis_url} if redis_url else {}),
        }
        with uvicorn_server(env, app="bench.bench_app:slow_factory") as base:
            asyncio.run(_bench(base, args.seconds, args.resumes, args.guard_requests, args.pdfs))


if __name__ == "__main__":
    main()
