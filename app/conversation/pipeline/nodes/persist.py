"""persist: one statement completes the turn's row and touches the session (reading back its
running summary as stored); then the history cache is refreshed — extended by this turn when
no other turn of the session finished meanwhile, else rebuilt from PostgreSQL. When a batch of
turns has left the history window uncovered, the summary job is enqueued, to run after the
commit (ADR 0035). While PostgreSQL cannot be reached the write is retried for
`THREADLINE_DB_WRITE_RETRY_SECONDS`. The write needs this process's lease on the pending turn
(ADR 0068): a turn another process finished meanwhile raises `TurnNotOwned`, and the runner
tells what is stored."""

from __future__ import annotations

import time

from langgraph.runtime import Runtime
from langgraph.types import Overwrite

from app.conversation.history import HistorySnapshot
from app.conversation.pipeline.context import TurnContext
from app.conversation.pipeline.state import TurnState, TurnUpdate, manifest_of, turn_ids
from app.conversation.pipeline.summary import fold_due, summary_job
from app.conversation.repository import TurnRepository
from app.conversation.turn.manifest import TimingsSection
from app.conversation.turn.types import HistoryTurn
from app.core.db_outage import retry_through_outage
from app.core.jobs import enqueue_after_commit
from app.pii.detect import anonymize


async def persist(state: TurnState, runtime: Runtime[TurnContext]) -> TurnUpdate:
    """Complete the turn's row, refresh the session's cached history, enqueue a due fold."""
    ctx = runtime.context
    ids = turn_ids(state)
    tenant, session = ids.tenant, ids.session
    query = state["stored_query"]
    answer = anonymize(state["answer"]).text if ctx.settings.pii_anonymize else state["answer"]
    latency_ms = int((time.time() - state["started_at"]) * 1000)
    manifest = manifest_of(state).merged(TimingsSection(latency_ms=latency_ms))

    async def write() -> HistorySnapshot:
        async with ctx.transaction(tenant) as db:
            done = await TurnRepository(db, tenant).complete(
                ids.turn,
                session,
                answer=answer,
                query_composition=state["query_composition"],
                manifest=manifest,
                model=state["model"],
                prompt_tokens=state["usage"]["prompt_tokens"],
                completion_tokens=state["usage"]["completion_tokens"],
                latency_ms=latency_ms,
            )
            summary = (done.summary, done.summarized_turns)
            if done.others == state["finished_turns"]:  # nothing else finished since loading
                loaded = HistorySnapshot(
                    turns=state["recent_turns"],
                    total=done.others,
                    summary=summary[0],
                    summarized_turns=summary[1],
                )
                this_turn = HistoryTurn(
                    turn_id=str(ids.turn), user_query=query, answer=answer, status="complete"
                )
                snapshot = ctx.history.extended(loaded, this_turn, summary)
            else:
                snapshot = await ctx.history.snapshot(db, tenant, session, summary)
            due = fold_due(
                snapshot["total"],
                summary[1],
                ctx.history.limit,
                ctx.settings.summary_batch_turns,
            )
            if due:  # the fold runs after the commit, off the turn's path
                enqueue_after_commit(db, summary_job(tenant, session), optional=True)
        return snapshot

    # The answer has been generated (and maybe streamed whole): a database outage must not
    # turn it into a failed turn. The write is one transaction, safe to repeat.
    snapshot = await retry_through_outage(
        write, budget_seconds=ctx.settings.db_write_retry_seconds, what="persist"
    )
    await ctx.history.store(tenant, session, snapshot)  # after the commit
    # The row now holds the whole manifest; the thread's checkpoint keeps only the outcome
    # (ADR 0024), so the merged metadata is replaced, not extended.
    return TurnUpdate(
        status="complete", context_metadata=Overwrite(TimingsSection(latency_ms=latency_ms).dump())
    )
