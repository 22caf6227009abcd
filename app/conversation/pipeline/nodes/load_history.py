"""load_history: the session's running summary and the turns it does not cover yet (cache, else
PostgreSQL), merged with what the client sent, without duplicates.

The summary is brought up to date in the background after turns are stored (ADR 0035), never
here: a turn only reads it. Every turn it does not cover yet goes to the prompt (within the
budget), so nothing is lost between two folds."""

from __future__ import annotations

from collections.abc import Sequence

from langgraph.runtime import Runtime

from app.conversation.pipeline.context import TurnContext
from app.conversation.pipeline.cpu import chars_of, run_sized
from app.conversation.pipeline.query_plan import history_query
from app.conversation.pipeline.state import TurnState, TurnUpdate, turn_ids
from app.conversation.turn.types import ChatMessage, HistoryTurn
from app.embeddings.base import prefetch
from app.pii.detect import anonymize


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


def _merged_and_queries(
    stored: Sequence[HistoryTurn], client: Sequence[ChatMessage], query: str
) -> tuple[list[HistoryTurn], list[str]]:
    """The merged history, and the queries retrieval will embed for it."""
    history = merge_client_history(stored, client)
    return history, [query, history_query(query, history)] if history else [query]


def split_window(
    cached: Sequence[HistoryTurn], total: int, limit: int, summarized: int
) -> tuple[list[HistoryTurn], int]:
    """The cached turns (the newest `len(cached)` of `total`) the summary does not cover yet,
    oldest first, and how many uncovered turns are older than the cache: those wait for the
    background fold, and this turn's prompt goes without them. No history when `limit` is 0."""
    if not limit:
        return [], 0
    first_cached = total - len(cached)  # index of the oldest cached turn
    uncovered = list(cached[max(0, summarized - first_cached) :])
    return uncovered, max(0, first_cached - summarized)


async def load_history(state: TurnState, runtime: Runtime[TurnContext]) -> TurnUpdate:
    """Load the session's summary and the turns it does not cover yet."""
    ctx = runtime.context
    ids = turn_ids(state)
    tenant, session = ids.tenant, ids.session
    async with ctx.reads(tenant) as db:
        snapshot, source = await ctx.history.load(
            db, tenant, session, expected_total=state["finished_turns"]
        )
    uncovered, awaiting = split_window(
        snapshot["turns"], snapshot["total"], ctx.history.limit, snapshot["summarized_turns"]
    )
    query = state["query"]
    client = state["client_history"]
    # Reading a long client-sent history (personal data, follow-ups) is pure Python: off
    # the event loop (app/conversation/pipeline/cpu.py). The guard bounded what is read.
    size = chars_of(m["content"] for m in client)
    history, queries = await run_sized(size, _merged_and_queries, uncovered, client, query)
    # The queries retrieve will search with are known now: their embeddings run while the
    # attachments, the FAQ fast path and the classification are worked out.
    prefetch(ctx.embedder, queries)
    return {
        "history": history,
        "history_source": source,
        "summary": snapshot["summary"],
        "summarized_turns": snapshot["summarized_turns"],
        "awaiting_summary": awaiting,
        "recent_turns": snapshot["turns"],
        "finished_turns": snapshot["total"],
    }
