"""load_history: the session's recent turns (cache, else PostgreSQL), merged with what the
client sent, without duplicates; and the turns the running summary does not cover yet."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph.runtime import Runtime

from app.graph.context import TurnContext
from app.graph.state import TurnState, turn_ids
from app.privacy.pii import anonymize
from app.turns.repository import TurnRepository
from app.turns.types import ChatMessage, HistoryTurn

MAX_FOLD_BATCH = 50


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def merge_client_history(
    stored: Sequence[HistoryTurn], client: Sequence[ChatMessage]
) -> list[HistoryTurn]:
    """Stored turns, then the client's exchanges that are not already among them."""
    known = {_norm(t["user_query"]) for t in stored} | {_norm(t["answer"]) for t in stored}
    extra: list[HistoryTurn] = []
    for message in client:
        content = message["content"]
        # Stored turns may be anonymised: compare both forms.
        if not content.strip() or {_norm(content), _norm(anonymize(content).text)} & known:
            continue
        if message["role"] == "user":
            extra.append(
                HistoryTurn(
                    turn_id=f"client-{len(extra)}",
                    user_query=message["content"],
                    answer="",
                    status="client",
                )
            )
        elif extra and not extra[-1]["answer"]:
            extra[-1]["answer"] = message["content"]
    return [*stored, *extra]


def split_window(
    cached: Sequence[HistoryTurn], total: int, limit: int, summarized: int
) -> tuple[list[HistoryTurn], list[HistoryTurn], tuple[int, int] | None]:
    """Split the cached turns (the newest `len(cached)` of `total`) into the verbatim window
    (the last `limit`, minus turns the summary already covers), the cached turns that left the
    window unsummarised, and — when those are older than the cache — the range to fetch."""
    first_cached = total - len(cached)  # index of the oldest cached turn
    window = list(cached[max(0, len(cached) - limit) :]) if limit else []
    window_start = total - len(window)
    window = window[max(0, summarized - window_start) :]
    if summarized >= window_start:
        return window, [], None
    if summarized >= first_cached:
        return window, list(cached[summarized - first_cached : window_start - first_cached]), None
    return window, [], (summarized, min(window_start - summarized, MAX_FOLD_BATCH))


async def load_history(state: TurnState, runtime: Runtime[TurnContext]) -> dict[str, Any]:
    """Load the session's history window and the turns the summary does not cover."""
    ctx = runtime.context
    ids = turn_ids(state)
    tenant, session = ids.tenant, ids.session
    async with ctx.transaction(tenant) as db:
        snapshot, source = await ctx.history.load(db, tenant, session)
        summarized = snapshot["summarized_turns"]
        window, unsummarized, fetch = split_window(
            snapshot["turns"], snapshot["total"], ctx.history.limit, summarized
        )
        if fetch is not None:  # older than the cache: rare (e.g. after lowering the window)
            unsummarized = await TurnRepository(db, tenant).finished_slice(session, *fetch)
    return {
        "history": merge_client_history(window, state["client_history"]),
        "history_source": source,
        "summary": snapshot["summary"],
        "summarized_turns": summarized,
        "unsummarized": unsummarized,
        "recent_turns": snapshot["turns"],
        "finished_turns": snapshot["total"],
    }
