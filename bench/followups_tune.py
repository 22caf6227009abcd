"""Tuning the follow-up weighting on the dev set (ADR 0034): every variant, one table.

    python -m bench.followups_tune [--embedder hashing|onnx|minilm] [--part all|base|hard]

Ingests `bench/data/followups` as `bench.followups` does, then replays the conversations
in-process with the product's own pieces (`app.conversation.pipeline.query_plan`, the retriever's
`search_queries` fusion, the extractive responder for the previous answer and what it
cited) under each variant of the weighting, and prints recall@5 / nDCG@5 on turns >= 2 per
label. Each query's legs are searched once and cached, so a variant costs only its fusion.
The dev set is the only data it sees; the chosen variant is then checked end to end through
`/chat` by `bench.followups`.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import uuid
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bench.common import bench_database
from bench.followups import (
    LABELS,
    PARTS,
    K,
    _prepare,
    load_conversations,
    ndcg_at_k,
    recall_at_k,
)

if TYPE_CHECKING:
    from app.retrieval.base import Hit

CHOSEN = "base=0.25 cue=0.75 overlap=0.5 cited=0.5"
_CITATION = re.compile(r"\[(\d+)\]")


@dataclass(frozen=True)
class Variant:
    """One weighting to score (the fields of `app.conversation.pipeline.query_plan.Weighting`)."""

    name: str
    base: float
    cue_weight: float
    overlap_weight: float
    cited: float
    history_turns: int = 3
    corrections_drop_cited: bool = True
    correction_history: float | None = None


def variants() -> list[Variant]:
    """The named baselines of the method, then a small grid around it."""
    fixed = [
        Variant("raw question only", 0.0, 0.0, 0.0, 0.0),
        Variant("chosen, history of the last question only", 0.25, 0.75, 0.5, 0.5, 1),
        Variant("chosen, corrections keep the cited leg", 0.25, 0.75, 0.5, 0.5, 3, False),
        Variant("chosen, a correction's history at 0.5", 0.25, 0.75, 0.5, 0.5, 3, True, 0.5),
        Variant("chosen, a correction's history at 0.25", 0.25, 0.75, 0.5, 0.5, 3, True, 0.25),
        Variant("history query, weight 1 always", 1.0, 0.0, 0.0, 0.0),
        Variant("history query, weight 0.5 always", 0.5, 0.0, 0.0, 0.0),
        Variant("cue only (0 or 1)", 0.0, 1.0, 0.0, 0.0),
        Variant("overlap only", 0.0, 0.0, 1.0, 0.0),
        Variant("cited documents only (weight 0.5)", 0.0, 0.0, 0.0, 0.5),
    ]
    grid = [
        Variant(f"base={b} cue={c} overlap={o} cited={d}", b, c, o, d)
        for b in (0.0, 0.25, 0.5)
        for c in (0.5, 0.75, 1.0)
        for o in (0.0, 0.5, 1.0)
        for d in (0.0, 0.25, 0.5, 1.0)
    ]
    return fixed + grid


@dataclass
class Turn:
    """A scored turn >= 2 of one variant."""

    label: str
    recall: float
    ndcg: float
    text: str = ""
    ranked: tuple[str, ...] = ()
    gold: tuple[str, ...] = ()
    queries: tuple[str, ...] = ()


async def _replay(
    owner_url: str, embedder_name: str, tenant_id: uuid.UUID, ids: dict[str, str], part: str
) -> dict[str, list[Turn]]:
    from app.conversation.pipeline.query_plan import (
        Weighting,
        cited_weight,
        plan_queries,
        relatedness,
    )
    from app.conversation.turn.types import HistoryTurn, SourceRef
    from app.core.db import scope_to_tenant
    from app.llm.responder import ExtractiveResponder
    from app.retrieval.hybrid import FusionSettings, HybridRetriever
    from app.retrieval.multi_query import fuse_queries
    from bench.product_store import open_product_store

    store = await open_product_store(owner_url, embedder_name)
    retriever = HybridRetriever(store.embedder, FusionSettings.from_settings(store.settings))
    cache: dict[str, dict[str, list[Hit]]] = {}

    async def legs(texts: list[str]) -> None:
        missing = [t for t in dict.fromkeys(texts) if t not in cache]
        if missing:
            async with store.sessions() as db, db.begin():
                await scope_to_tenant(db, tenant_id)
                found = await retriever.query_legs(db, tenant_id, missing)
            cache.update(zip(missing, found, strict=True))

    conversations = load_conversations(part)
    responder = ExtractiveResponder()
    settings = retriever.settings
    results: dict[str, list[Turn]] = {}
    for variant in variants():
        weighting = Weighting(
            base=variant.base,
            cue_weight=variant.cue_weight,
            overlap_weight=variant.overlap_weight,
            cited=variant.cited,
            history_turns=variant.history_turns,
            corrections_drop_cited=variant.corrections_drop_cited,
            correction_history=variant.correction_history,
        )
        scored: list[Turn] = []
        for conversation in conversations:
            history: list[HistoryTurn] = []
            cited: list[str] = []
            for turn in conversation["turns"]:
                query = turn["text"]
                related = relatedness(query, history, weighting)
                queries = plan_queries(query, history, related, weighting=weighting)
                await legs([q.text for q in queries if q.weight > 0])
                result = fuse_queries(
                    {q.name: cache[q.text] for q in queries if q.weight > 0},
                    {q.name: q.weight for q in queries if q.weight > 0},
                    leg_weights=retriever.leg_weights(),
                    method=settings.method,
                    rrf_k=settings.k,
                    k=K,
                    cited=cited,
                    cited_weight=cited_weight(related, weighting),
                )
                ranked = list(dict.fromkeys(ids[h.passage.source_id] for h in result.hits))
                if history:
                    gold = set(turn["gold"])
                    scored.append(
                        Turn(
                            turn["label"],
                            recall_at_k(ranked, gold),
                            ndcg_at_k(ranked, gold),
                            f"{conversation['id']} {query}",
                            tuple(ranked),
                            tuple(turn["gold"]),
                            tuple(f"{q.name}@{q.weight}: {q.text}" for q in queries),
                        )
                    )
                sources = [
                    SourceRef(
                        n=n,
                        id=h.passage.id,
                        kind=h.passage.kind,
                        source_id=h.passage.source_id,
                        title=h.passage.title,
                        score=h.passage.score,
                        text=h.passage.text,
                    )
                    for n, h in enumerate(result.hits, start=1)
                ]
                answer = responder.compose(sources, history, query)
                numbers = {int(n) for n in _CITATION.findall(answer)}
                cited = [s["id"] for s in sources if s["n"] in numbers] or [
                    s["id"] for s in sources
                ]
                history.append(
                    HistoryTurn(turn_id="t", user_query=query, answer=answer, status="complete")
                )
        results[variant.name] = scored
    await store.engine.dispose()
    return results


def report(results: dict[str, list[Turn]], embedder_name: str, top: int) -> None:
    """Recall@5 per variant and slice, the named variants first, then the grid's best."""
    names = [v.name for v in variants()]

    def mean(turns: list[Turn], label: str | None, metric: str) -> float:
        rows = [t for t in turns if label is None or t.label == label]
        return sum(getattr(t, metric) for t in rows) / len(rows) if rows else 0.0

    raw = results["raw question only"]
    floors = {label: mean(raw, label, "recall") for label in LABELS}
    print(f"\nembedder {embedder_name}: recall@5 (nDCG@5 overall) on turns >= 2")
    print(
        f"{'variant':<42}{'overall':>15}"
        + "".join(f"{label:>15}" for label in LABELS)
        + f"{'clarif. nDCG':>14}"
    )

    def line(name: str) -> str:
        turns = results[name]
        cells = f"{mean(turns, None, 'recall'):>8.3f} / {mean(turns, None, 'ndcg'):.3f}"
        for label in LABELS:
            value = mean(turns, label, "recall")
            mark = "*" if value < floors[label] - 1e-9 else " "
            cells += f"{value:>14.3f}{mark}"
        cells += f"{mean(turns, 'clarification', 'ndcg'):>14.3f}"
        return f"{name:<42}{cells}"

    fixed = names[:10]
    for name in fixed:
        print(line(name))
    print(line(CHOSEN) + "  <- chosen (app.conversation.pipeline.query_plan.WEIGHTING)")
    grid = sorted(names[10:], key=lambda n: -mean(results[n], None, "recall"))
    print(f"-- grid: best {top} of {len(grid)} by overall recall@5 (* below raw on a slice)")
    for name in grid[:top]:
        print(line(name))
    by_slice: dict[str, int] = defaultdict(int)
    for name in grid:
        for label in LABELS:
            if mean(results[name], label, "recall") < floors[label] - 1e-9:
                by_slice[label] += 1
    print(f"grid variants below raw, per slice: {dict(by_slice)}")


def main() -> None:
    """Run the tuning table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--embedder", default="hashing", choices=["hashing", "onnx", "minilm"])
    parser.add_argument(
        "--part", default="all", choices=["all", *PARTS], help="replay only this part's turns"
    )
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--misses", help="print the turns this variant misses")
    args = parser.parse_args()
    with bench_database() as owner_url:
        tenant_id, ids = asyncio.run(_prepare(owner_url, args.embedder))
        results = asyncio.run(_replay(owner_url, args.embedder, tenant_id, ids, args.part))
    report(results, f"{args.embedder}, part {args.part}", args.top)
    for turn in results.get(args.misses or "", []):
        if turn.recall < 1:
            print(f"{turn.label:<14}{turn.text}  gold={turn.gold} got={turn.ranked}")
            for query in turn.queries:
                print(f"      {query}")


if __name__ == "__main__":
    main()
