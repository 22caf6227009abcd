"""The model's turn with a provider-shaped model: calls per turn, first token, prompt cache.

    python -m bench.model_turn [--turns 200] [--sessions 1,16] [--tokens 40]
                               [--baseline-ref REF | --no-baseline]

Runs the real app (uvicorn, `THREADLINE_LLM=openai-compatible`, the real provider code) against
`ShapedOpenAI` (bench/fake_shaped.py: 300 ms to the first token, then 50 tokens/s, usage with
cached tokens the way OpenAI counts them) on loopback, and drives `/chat/stream` over HTTP:
`--turns` turns per session, one session and then `--sessions` sessions at once. Every tenth
question is a follow-up ("And the second one?"), so the rewrite is counted apart.

The same run measures two builds of the app: this checkout and, as the baseline, the code of
`--baseline-ref` (by default where this branch left `main`; exported with `git archive` into
a temporary directory and run there with the same Python environment, its own embedded
PostgreSQL, the same fake model and the same questions). Comparing builds rather than a
switch inside the new code measures today's behaviour itself — its in-turn summary and its
prompt order — rather than an imitation of it.

Reported per build and concurrency:
  * model calls before the first token, per turn: the answer's call plus every call that
    began after the turn was sent and ended before its first token (a call the turn waited
    for); follow-up rewrites are counted separately;
  * summary calls per turn, and how many of them the turn waited for;
  * time to the first token beyond the model's own 300 ms, p50/p95 (client side);
  * the answer request's prompt tokens at turns 10, 50 and 200 (session 0);
  * the share of each answer prompt in a prefix identical to the same session's previous
    answer prompt (exact, cl100k tokens), from turn 5 on, and the share OpenAI would have
    billed as cached.

Over 300 lines: preparing a build, driving it and attributing the fake model's requests to
turns stay in one module, which the baseline export copies whole into the older checkout.

Tools are on, as they are by default for a provider with tool calling, and the fake model uses
them as such a model does: asked about the handbook with no sources in its prompt, it calls
`search_knowledge_base` first (a `search` call, counted before the first token when the turn
waits for it), and answers once it has sources. `--no-tools` measures the always-retrieve path
(`THREADLINE_AGENT_TOOLS=false`) instead.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.chat_overhead import UNLIMITED
from bench.common import ROOT, bench_database, free_port, percentile

JWT_SECRET = "bench-secret-" + "x" * 40
PASSWORD = "bench password 1"
EMAIL = "bench@example.com"
MODEL_FIRST_TOKEN_MS = 300.0
BEFORE_ANSWER = (
    "guard_input",
    "load_history",
    "resolve_attachments",
    "triage",
    "classify",
    "retrieve",
    "build_context",
)
TOPICS = [
    ("annual leave", "Staff book annual leave in the HR portal at least two weeks ahead."),
    ("travel expenses", "Travel expenses are claimed within thirty days with receipts."),
    ("laptop replacement", "Laptops are replaced every four years or when repair costs more."),
    ("remote work", "Remote work is agreed with the manager for up to three days a week."),
    ("parental leave", "Parental leave lasts twenty weeks at full pay for either parent."),
    ("security badges", "Lost security badges are reported to reception the same day."),
    ("training budget", "Each employee has a yearly training budget of two thousand euros."),
    ("expense approvals", "Expenses above five hundred euros need a director's approval."),
    ("office hours", "The office opens at seven and closes at eight on working days."),
    ("sick leave", "Sick leave longer than three days needs a doctor's certificate."),
    ("password rotation", "Passwords are rotated every ninety days through the SSO portal."),
    ("onboarding", "New starters get a buddy and a checklist for their first month."),
]
FILLER = (
    "The policy applies to every employee and contractor of the company. Managers confirm "
    "requests in writing, and the HR team keeps a record for audits. Exceptions are rare and "
    "are decided case by case by the department head after consulting HR. "
)


def question(session: int, turn: int) -> str:
    """The `turn`-th question of a session, tagged so the fake model knows the session."""
    if turn % 10 == 9:
        return f"[s{session}] And the second one?"
    topic = TOPICS[(turn * 5 + session) % len(TOPICS)][0]
    return f"[s{session}] What does the handbook say about {topic}? (question {turn})"


# --- preparing a database (run inside the build under test) ----------------------------------


async def prepare(owner_url: str) -> None:
    """Migrate, create the bench tenant and user, ingest the handbook (this build's code)."""
    from app.auth.service import create_user
    from app.core.db import scope_to_tenant
    from app.tenants.service import create_tenant
    from bench.product_store import add_and_ingest, open_product_store

    store = await open_product_store(owner_url, "hashing")
    async with store.sessions() as db, db.begin():
        tenant = await create_tenant(db, f"bench-{uuid.uuid4().hex[:6]}")
        await scope_to_tenant(db, tenant.id)
        await create_user(
            db, store.settings, tenant.id, email=EMAIL, password=PASSWORD, role="admin"
        )
    for i, (topic, fact) in enumerate(TOPICS):
        text = f"{topic.title()}\n\n{fact} {FILLER}{fact}"
        await add_and_ingest(store, tenant.id, text, title=topic.title(), external_id=f"h{i}")
    await store.engine.dispose()


# --- processes ---------------------------------------------------------------------------------


@contextmanager
def process(args: list[str], cwd: Path, env: dict[str, str], ready_url: str) -> Iterator[None]:
    """A child process, stopped (by its PID) when the block ends; waits for `ready_url`."""
    log = open(os.environ.get("BENCH_SERVER_LOG", os.devnull), "a")  # noqa: SIM115
    child = subprocess.Popen(
        [sys.executable, *args], cwd=cwd, env={**os.environ, **env}, stdout=log, stderr=log
    )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if child.poll() is not None:
                raise RuntimeError(f"{args[:3]} exited with {child.returncode}")
            try:
                httpx.get(ready_url, timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.3)
        yield
    finally:
        child.terminate()
        try:
            child.wait(timeout=20)
        except subprocess.TimeoutExpired:
            child.kill()
        log.close()


@contextmanager
def checkout(ref: str | None) -> Iterator[Path]:
    """This checkout, or `ref` exported into a temporary directory with this bench's files."""
    if ref is None:
        yield ROOT
        return
    target = Path(tempfile.mkdtemp(prefix="tl-baseline-"))
    try:
        archive = subprocess.run(
            [shutil.which("git") or "git", "archive", "--format=tar", ref],
            cwd=ROOT,
            check=True,
            capture_output=True,
        ).stdout
        archive_path = target / "code.tar"
        archive_path.write_bytes(archive)
        with tarfile.open(archive_path) as tar:
            tar.extractall(target, filter="data")
        archive_path.unlink()
        for name in ("model_turn.py", "fake_shaped.py", "fake_openai.py", "product_store.py"):
            shutil.copy(ROOT / "bench" / name, target / "bench" / name)
        yield target
    finally:
        shutil.rmtree(target, ignore_errors=True)


# --- driving the app -----------------------------------------------------------------------------


@dataclass
class Turn:
    """One turn as the client saw it."""

    session: int
    index: int
    started: float
    first_token: float = 0.0
    ended: float = 0.0
    done: dict[str, Any] = field(default_factory=dict)


async def _stream_turn(client: httpx.AsyncClient, session_id: str, text: str, turn: Turn) -> None:
    body = {"session_id": session_id, "message": text}
    event = ""
    async with client.stream("POST", "/chat/stream", json=body) as response:
        if response.status_code != 200:
            raise RuntimeError(f"/chat/stream: {response.status_code} {await response.aread()!r}")
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                if event == "token" and not turn.first_token:
                    turn.first_token = time.time()
                elif event == "done":
                    turn.done = json.loads(line[6:])
                elif event == "error":
                    raise RuntimeError(f"turn failed: {line}")
    turn.ended = time.time()
    if not turn.first_token:  # answered without the model (e.g. a fast path)
        turn.first_token = turn.ended


async def drive(base: str, sessions: int, turns: int, tag_offset: int) -> list[Turn]:
    """`sessions` sessions at once, `turns` turns each, one after another within a session."""
    async with httpx.AsyncClient(base_url=base, timeout=120) as client:
        token = await client.post("/auth/token", json={"email": EMAIL, "password": PASSWORD})
        client.headers["Authorization"] = f"Bearer {token.json()['access_token']}"
        ids = [
            (await client.post("/sessions", json={"title": f"s{i}"})).json()["id"]
            for i in range(sessions)
        ]
        done: list[Turn] = []

        async def run(n: int, session_id: str) -> None:
            for i in range(turns):
                turn = Turn(session=tag_offset + n, index=i, started=time.time())
                await _stream_turn(client, session_id, question(tag_offset + n, i), turn)
                done.append(turn)

        await asyncio.gather(*(run(n, s) for n, s in enumerate(ids)))
        await asyncio.sleep(3)  # let the last background summaries reach the model
        return done


# --- figures -------------------------------------------------------------------------------------


@dataclass
class Figures:
    """What one build did at one concurrency."""

    turns: int
    path_calls: list[int]
    rewrites: int
    summaries: int
    summaries_waited: int
    ttft_plain_ms: list[float]
    """Time to first token beyond the model's 300 ms, turns with no rewrite."""
    ttft_rewrite_ms: list[float]
    """The same, turns whose follow-up was rewritten by the model first."""
    to_model_ms: list[float]
    """Turns without a rewrite: from the request's start to the model request's arrival (the
    app's work before the model)."""
    from_model_ms: list[float]
    """The same turns: the rest of their time beyond the model's, after its first token (the
    answer's way back to the client)."""
    own_ms: list[float]
    """Every turn's time to first token minus the model calls it waited for (the answer's
    first 300 ms, a rewrite, an in-turn summary): the app's own work before the first token."""
    node_p50_ms: dict[str, float]
    """Median time of each node that runs before the answer (from the `done` event)."""
    prompt_at: dict[int, int]
    prefix_share: list[float]
    """Per answer prompt from turn 5 on: its share in a prefix identical to the previous."""
    prompt_tokens: int
    prefix_tokens: int
    cached_tokens: int


def figures(turns: list[Turn], records: list[dict[str, Any]]) -> Figures:
    """Attribute the model's requests to the turns of their session and sum them up."""
    by_session: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        by_session.setdefault(record["session"], []).append(record)
    path_calls: list[int] = []
    waited = 0
    rewrites = 0
    plain_ttft: list[float] = []
    rewrite_ttft: list[float] = []
    own_ms: list[float] = []
    to_model_ms: list[float] = []
    from_model_ms: list[float] = []
    for turn in turns:
        window = [
            r
            for r in by_session.get(str(turn.session), [])
            if turn.started <= r["arrived"] <= turn.first_token
        ]
        answer = sum(1 for r in window if r["kind"] == "answer")
        before = [r for r in window if r["kind"] != "answer" and r["finished"] <= turn.first_token]
        rewrites += sum(1 for r in before if r["kind"] == "rewrite")
        waited += sum(1 for r in before if r["kind"] == "summary")
        path_calls.append(answer + sum(1 for r in before if r["kind"] != "rewrite"))
        beyond = (turn.first_token - turn.started) * 1000 - MODEL_FIRST_TOKEN_MS
        rewritten = any(r["kind"] == "rewrite" for r in before)
        (rewrite_ttft if rewritten else plain_ttft).append(beyond)
        answered = [r for r in window if r["kind"] == "answer"]
        if not rewritten and answered:
            to_model_ms.append((answered[0]["arrived"] - turn.started) * 1000)
            from_model_ms.append(beyond - to_model_ms[-1])
        waited_ms = sum((r["finished"] - r["arrived"]) * 1000 for r in before)
        own_ms.append(beyond - waited_ms)
    answers: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        if record["kind"] == "answer":
            answers.setdefault(record["session"], []).append(record)
    first = str(min(t.session for t in turns))
    prompt_at = {
        n: answers[first][n - 1]["prompt_tokens"]
        for n in (10, 50, 200)
        if len(answers.get(first, [])) >= n
    }
    from_turn_5 = [r for rs in answers.values() for r in rs[4:] if r["prompt_tokens"]]
    return Figures(
        turns=len(turns),
        path_calls=path_calls,
        rewrites=rewrites,
        summaries=sum(1 for r in records if r["kind"] == "summary"),
        summaries_waited=waited,
        ttft_plain_ms=plain_ttft,
        ttft_rewrite_ms=rewrite_ttft,
        own_ms=own_ms,
        to_model_ms=to_model_ms,
        from_model_ms=from_model_ms,
        node_p50_ms={
            node: statistics.median(t.done.get("node_ms", {}).get(node, 0.0) for t in turns)
            for node in BEFORE_ANSWER
        },
        prompt_at=prompt_at,
        prefix_share=[r["prefix_tokens"] / r["prompt_tokens"] for r in from_turn_5],
        prompt_tokens=sum(r["prompt_tokens"] for r in from_turn_5),
        prefix_tokens=sum(r["prefix_tokens"] for r in from_turn_5),
        cached_tokens=sum(r["cached_tokens"] for r in from_turn_5),
    )


def report(label: str, sessions: int, f: Figures) -> None:
    """Print one build's figures at one concurrency."""
    n = f.turns
    exactly_one = sum(1 for c in f.path_calls if c == 1)
    print(f"\n  {label} — {sessions} session(s), {n} turns")
    print(
        f"    model calls before the first token  {sum(f.path_calls) / n:.2f}/turn "
        f"(exactly 1 in {100 * exactly_one / n:.0f} % of turns); "
        f"follow-up rewrites {f.rewrites} ({f.rewrites / n:.2f}/turn)"
    )
    print(
        f"    summary calls                       {f.summaries} ({f.summaries / n:.2f}/turn), "
        f"{f.summaries_waited} waited for by a turn"
    )
    plain, rewritten = f.ttft_plain_ms, f.ttft_rewrite_ms
    print(
        f"    first token beyond the model's 300 ms  p50 {statistics.median(plain):.1f} ms   "
        f"p95 {percentile(plain, 95):.1f} ms   (n={len(plain)}, turns without a rewrite)"
    )
    if f.to_model_ms:
        back = f.from_model_ms
        print(
            f"      until the model's request arrives  p50 {statistics.median(f.to_model_ms):.1f}"
            f" ms   p95 {percentile(f.to_model_ms, 95):.1f} ms; after its first token p50 "
            f"{statistics.median(back):.1f} ms   p95 {percentile(back, 95):.1f} ms"
        )
    if rewritten:
        print(
            f"      turns with a follow-up rewrite    p50 {statistics.median(rewritten):.1f} ms"
            f"   (n={len(rewritten)})"
        )
    print(
        f"      the app's own work (less the calls waited for)  p50 "
        f"{statistics.median(f.own_ms):.1f} ms   p95 {percentile(f.own_ms, 95):.1f} ms"
    )
    nodes = "  ".join(f"{k} {v:.1f}" for k, v in f.node_p50_ms.items())
    print(f"      nodes before the answer, p50 ms   {nodes}")
    prompts = "   ".join(f"turn {k}: {v}" for k, v in f.prompt_at.items())
    print(f"    prompt tokens                       {prompts}")
    if f.prefix_share:
        identical = 100 * f.prefix_tokens / f.prompt_tokens
        print(
            f"    prefix identical to previous turn   {identical:.0f} % of prompt tokens "
            f"(per turn: median {100 * statistics.median(f.prefix_share):.0f} %); "
            f"billed as cached {100 * f.cached_tokens / f.prompt_tokens:.0f} %"
        )


def run_build(label: str, code: Path, args: argparse.Namespace, redis_url: str | None) -> None:
    """Prepare a database for the build, start the fake model and the app, drive both loads."""
    with bench_database() as owner_url:
        subprocess.run(
            [sys.executable, "-m", "bench.model_turn", "--prepare", owner_url],
            cwd=code,
            check=True,
        )
        model_port, app_port = free_port(), free_port()
        model_base = f"http://127.0.0.1:{model_port}/v1"
        fake = ["-m", "bench.fake_openai", "--shaped", "--port", str(model_port)]
        env = {
            "DATABASE_URL": owner_url,
            "THREADLINE_JWT_SECRET": JWT_SECRET,
            "THREADLINE_LOG_LEVEL": "WARNING",
            "THREADLINE_LLM": "openai-compatible",
            "OPENAI_BASE_URL": model_base,
            **({"THREADLINE_AGENT_TOOLS": "false"} if args.no_tools else {}),
            "THREADLINE_REDIS_PREFIX": f"mtb{uuid.uuid4().hex[:8]}:",
            **UNLIMITED,
            **({"REDIS_URL": redis_url} if redis_url else {}),
        }
        server = [
            "-m",
            "uvicorn",
            "app.main:app_factory",
            "--factory",
            "--port",
            str(app_port),
            "--log-level",
            "warning",
            "--no-access-log",
        ]
        base = f"http://127.0.0.1:{app_port}"
        with (
            process([*fake, "--tokens", str(args.tokens)], ROOT, {}, f"{model_base}/stats"),
            process(server, code, env, f"{base}/readyz"),
        ):
            for offset, sessions in enumerate(args.sessions):
                httpx.post(f"{model_base}/stats")
                turns = asyncio.run(drive(base, sessions, args.turns, 100 * offset))
                records = httpx.get(f"{model_base}/stats", timeout=30).json()["records"]
                report(label, sessions, figures(turns, records))


def _redis_url() -> str | None:
    url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15")
    import redis

    try:
        redis.Redis.from_url(url, socket_connect_timeout=1).ping()
        return url
    except redis.RedisError:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--sessions", default="1,16", help="concurrencies, comma-separated")
    parser.add_argument("--tokens", type=int, default=40, help="answer length, in tokens")
    parser.add_argument(
        "--baseline-ref",
        default=None,
        help="git ref of today's code (default: where this branch left main)",
    )
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument(
        "--no-tools", action="store_true", help="the always-retrieve path, without tool calling"
    )
    parser.add_argument("--prepare", metavar="OWNER_URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.prepare:
        asyncio.run(prepare(args.prepare))
        return
    args.sessions = [int(s) for s in args.sessions.split(",")]
    redis_url = _redis_url()
    print(
        f"Model turn: {args.turns} turns per session, answers of {args.tokens} tokens, "
        f"model 300 ms to first token then 50 tokens/s, "
        f"{'always-retrieve (no tools)' if args.no_tools else 'tool calling on'} "
        f"(Redis: {redis_url or 'in-process'})"
    )
    if args.baseline_ref is None:  # main may have moved on (and need other packages)
        args.baseline_ref = subprocess.run(
            [shutil.which("git") or "git", "merge-base", "HEAD", "main"],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()[:12]
    builds: list[tuple[str, str | None]] = [("this build", None)]
    if not args.no_baseline:
        builds.insert(0, (f"baseline {args.baseline_ref}", args.baseline_ref))
    for label, ref in builds:
        with checkout(ref) as code:
            run_build(label, code, args, redis_url)


if __name__ == "__main__":
    main()
