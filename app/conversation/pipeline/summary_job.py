"""The background summary job: folds a batch of turns into a session's running summary.

A turn never waits for the summary (ADR 0035). `persist` enqueues this job after its
transaction commits when at least `summary_batch_turns` turns have left the history window
uncovered; the job (in-process on the embedded default, a Celery task with a broker) folds
all of them at once, so the summary — the start of every prompt after the instructions —
changes once per batch and the prompt's prefix stays the same in between.

Never twice for the same turns: the job first claims the session's row (a compare-and-set on
`summary_claimed_until`); a second job for the same session finds the claim and leaves. The
new summary is stored only if the summary still covers what the job read (another
compare-and-set, on `summarized_turns`). A fold that fails (the model errs or times out) only
releases the claim: the turns stay uncovered, the turns' prompts keep them verbatim, and the
next finished turn enqueues the job again.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.conversation.history import HistoryStore
from app.conversation.pipeline.nodes.triage import redact_blocked
from app.conversation.pipeline.summary import (
    SUMMARIZE,
    addition_prompt,
    appended,
    fold_by_rules,
    fold_due,
    summary_prompt,
)
from app.conversation.repository import SessionStateRepository, TurnRepository
from app.conversation.turn.types import HistoryTurn
from app.core.db import TENANT
from app.llm.responder import Responder
from app.llm.tokens import count_tokens
from app.observability import metrics

logger = logging.getLogger(__name__)

MAX_FOLD_TURNS = 50
"""Most turns one fold reads (a session far behind catches up over a few jobs)."""


class SummaryDeps(Protocol):
    """What the job needs: the API's TurnContext has it all, as has a worker's runtime."""

    @property
    def settings(self) -> Settings:
        """The settings (batch, claim, summary cap)."""
        ...

    @property
    def sessionmaker(self) -> async_sessionmaker[AsyncSession]:
        """Database sessions."""
        ...

    @property
    def history(self) -> HistoryStore:
        """The history cache (and its window)."""
        ...

    @property
    def responder(self) -> Responder:
        """The configured chat model, read when the job runs."""
        ...


ADDITION_SHARE = 4
"""A fold's addition is at most a quarter of the summary's cap; a merge aims at half of it."""


async def fold(responder: Responder, previous: str, turns: list[HistoryTurn], cap: int) -> str:
    """The summary with `turns` folded in: by the model when there is one (its errors
    propagate: the caller keeps the turns for the next fold), else by rules.

    While there is room the model's summary of the new turns is appended, so the summary
    read by earlier prompts stays the start of the next ones (their cached prefix, ADR
    0035); when there is not, one call merges everything into a summary of half the cap,
    which leaves room for the next additions."""
    if responder.uses_language_model:
        room = cap - count_tokens(previous) - 1
        addition_cap = cap // ADDITION_SHARE
        if room >= addition_cap:
            text = await responder.complete(addition_prompt(previous, turns, addition_cap))
            if text and text.strip() and count_tokens(text) <= room:
                return appended(previous, text.strip())
        else:
            text = await responder.complete(summary_prompt(previous, turns, cap // 2))
            if text and text.strip() and count_tokens(text) <= cap:
                return text.strip()
        logger.warning("summary by the model empty or over its cap; folded by rules")
    return fold_by_rules(previous, turns, cap)


@asynccontextmanager
async def _transaction(deps: SummaryDeps, tenant_id: uuid.UUID) -> AsyncIterator[AsyncSession]:
    async with deps.sessionmaker() as db:
        db.info[TENANT] = tenant_id
        async with db.begin():
            yield db


async def fold_session(deps: SummaryDeps, tenant_id: uuid.UUID, session_id: uuid.UUID) -> str:
    """Fold the session's due turns into its summary; how it ended: `folded`, `busy` (another
    job holds the session), `not_due`, `superseded` (a fold was stored meanwhile) or
    `failed`."""
    settings = deps.settings
    async with _transaction(deps, tenant_id) as db:
        state = SessionStateRepository(db, tenant_id)
        claimed = await state.claim_fold(session_id, settings.summary_claim_seconds)
        if claimed is None:
            return _outcome("busy")
        previous, covered, claim = claimed
        turns = TurnRepository(db, tenant_id)
        _, finished = await turns.recent(session_id, 0)
        due = fold_due(finished, covered, deps.history.limit, settings.summary_batch_turns)
        if not due:
            await state.release_fold(session_id)
            return _outcome("not_due")
        batch = redact_blocked(
            await turns.finished_slice(session_id, covered, min(due, MAX_FOLD_TURNS))
        )
    try:
        # Within the claim: past it another job may take the same turns, and they would be
        # summarised (and paid for) twice. A timeout is a failed fold like any other.
        async with asyncio.timeout(settings.summary_claim_seconds * 0.9):
            summary = await fold(deps.responder, previous, batch, settings.summary_max_tokens)
    except Exception:
        logger.warning("summary fold failed; the turns wait for the next one", exc_info=True)
        async with _transaction(deps, tenant_id) as db:
            await SessionStateRepository(db, tenant_id).release_fold(session_id)
        return _outcome("failed")
    async with _transaction(deps, tenant_id) as db:
        stored = await SessionStateRepository(db, tenant_id).store_fold(
            session_id, claim, covered, summary, covered + len(batch)
        )
        snapshot = await deps.history.snapshot(db, tenant_id, session_id) if stored else None
    if snapshot is None:
        return _outcome("superseded")
    await deps.history.store(tenant_id, session_id, snapshot)  # after the commit
    return _outcome("folded")


def _outcome(outcome: str) -> str:
    metrics.SUMMARY_JOBS.labels(outcome=outcome).inc()
    return outcome


def summary_handlers(deps: SummaryDeps) -> dict[str, Callable[..., Awaitable[Any]]]:
    """The job runner's handler for summary jobs, by job name."""

    async def run(tenant_id: str, session_id: str) -> str:
        return await fold_session(deps, uuid.UUID(tenant_id), uuid.UUID(session_id))

    return {SUMMARIZE: run}
