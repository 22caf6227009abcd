"""Finishing a turn whose process is gone (killed, out of memory, node lost).

The turn is still `pending` and its lease has expired (or a stop found its owner gone). Any
process may finish it, once: the row is locked with SKIP LOCKED, so two processes never both
do. It is stored `incomplete` with the partial answer the stream buffer holds (its `token`
events, through the same output checks a stopped turn's partial answer goes through); the
buffer gets the terminal `done` its producer never wrote, so resuming clients end at once;
the turn's idempotency record gets the answer, so a retry with the same key replays it and
never runs the turn a second time; the session's cached history is refreshed.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.conversation.durability.idempotency import IdempotencyStore
from app.conversation.pipeline.answer_check import check_answer
from app.conversation.pipeline.context import TurnContext
from app.conversation.repository import TurnRepository
from app.conversation.repository.turn_leases import Orphan, TurnLeaseRepository
from app.conversation.streaming.buffer import (
    TERMINAL_EVENTS,
    BufferedEvent,
    StreamBuffer,
    append_terminal,
    buffered_events,
)
from app.conversation.turn.events import DoneEvent, DoneExtras
from app.conversation.turn.manifest import Manifest
from app.conversation.turn.schemas import ChatResponse
from app.conversation.turn.types import PublicSource, SourceRef, TurnMeta
from app.core.db import TENANT
from app.llm.tokens import count_tokens
from app.pii.detect import anonymize

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Recovered:
    """What the buffer kept of the orphan's stream."""

    partial: str
    meta: TurnMeta | None
    sources: list[PublicSource]
    ended: BufferedEvent | None
    """The buffer's own terminal event, when the producer got that far."""


def recover(events: list[BufferedEvent]) -> Recovered:
    """What the buffered events of a dead producer hold: partial answer, meta, sources, end."""
    partial: list[str] = []
    meta: TurnMeta | None = None
    sources: list[PublicSource] = []
    ended = None
    for event in events:
        if event.name == "token":
            partial.append(str(event.data.get("text", "")))
        elif event.name == "meta":
            meta = cast(TurnMeta, event.data)
        elif event.name == "sources":
            sources = list(event.data.get("sources", []))
        elif event.name in TERMINAL_EVENTS:
            ended = event
    return Recovered("".join(partial), meta, sources, ended)


@asynccontextmanager
async def _transaction(
    sessionmaker: async_sessionmaker[AsyncSession], tenant_id: uuid.UUID
) -> AsyncIterator[AsyncSession]:
    async with sessionmaker() as db:
        db.info[TENANT] = tenant_id
        async with db.begin():
            yield db


class OrphanFinisher:
    """Finishes orphaned turns for one process (see the module docstring)."""

    def __init__(
        self,
        context: TurnContext,
        buffer: StreamBuffer,
        idempotency: IdempotencyStore,
    ) -> None:
        self.context = context
        self.buffer = buffer
        self.idempotency = idempotency

    async def finish(
        self,
        tenant_id: uuid.UUID,
        turn_id: uuid.UUID,
        *,
        force: bool = False,
        reason: str,
        sessionmaker: async_sessionmaker[AsyncSession] | None = None,
    ) -> dict[str, Any] | None:
        """Finish the turn if it is an orphan (any pending turn with `force`); its `done`
        event data, or None when it was not one (running, finished, or being finished).
        `sessionmaker`: for the background sweep, the process's own (default: the one
        requests use)."""
        ctx = self.context
        async with _transaction(sessionmaker or ctx.sessionmaker, tenant_id) as db:
            orphan = await TurnLeaseRepository(db, tenant_id).lock_orphan(turn_id, force=force)
            if orphan is None:
                return None
            recovered = recover(await self._events(turn_id))
            ending = self._done_event(orphan, recovered, reason)
            done = ending.data()
            answer = ending.answer
            stored = anonymize(answer).text if ctx.settings.pii_anonymize else answer
            latency_ms = ending.extras.get("latency_ms")
            manifest = ending.context_metadata.merged(
                {"latency_ms": latency_ms, "error": {"code": reason}}
            )
            await TurnRepository(db, tenant_id).finish_unfinished(
                turn_id,
                status="incomplete",
                answer=stored,
                manifest=manifest,
                latency_ms=latency_ms,
                completion_tokens=ending.usage["completion_tokens"],
            )
        logger.warning("finished an orphaned turn", extra={"turn": str(turn_id), "reason": reason})
        if recovered.ended is None:
            await self._end_buffer(turn_id, done)
        await self._record_answer(orphan, ending, recovered.sources)
        try:
            async with _transaction(sessionmaker or ctx.sessionmaker, tenant_id) as db:
                await ctx.history.refresh(db, tenant_id, orphan.session_id)
        except Exception:
            logger.warning("could not refresh the history of an orphaned turn", exc_info=True)
        return done

    async def end_stream(self, turn_id: uuid.UUID, done: dict[str, Any]) -> None:
        """Give a finished turn's buffered stream the terminal event its producer never
        wrote (it died after storing the turn)."""
        await self._end_buffer(turn_id, done)

    async def _events(self, turn_id: uuid.UUID) -> list[BufferedEvent]:
        try:
            return await buffered_events(self.buffer, turn_id)
        except Exception:  # Redis down: the turn is finished without its partial answer
            logger.warning("stream buffer unavailable: orphan finished without its text")
            return []

    def _done_event(self, orphan: Orphan, recovered: Recovered, reason: str) -> DoneEvent:
        partial = recovered.partial
        if recovered.ended is not None and recovered.ended.name == "done":
            partial = str(recovered.ended.data.get("answer", partial))
        sources = cast(
            list[SourceRef],
            [{**s, "text": s.get("snippet", "")} for s in recovered.sources],
        )
        checked = check_answer(partial, orphan.user_query, sources, self.context.settings)
        guardrail = checked.validation.output_guardrail
        altered = bool(guardrail and guardrail.issues)
        answer = checked.text if altered else partial
        completion = count_tokens(answer)
        latency_ms = int((time.time() - orphan.created_at.timestamp()) * 1000)
        return DoneEvent(
            turn_id=orphan.turn_id,
            session_id=orphan.session_id,
            status="incomplete",
            answer=answer,
            query_composition=recovered.meta["query_composition"] if recovered.meta else None,
            usage={"prompt_tokens": 0, "completion_tokens": completion, "total_tokens": completion},
            # no triage record: None
            context_metadata=Manifest(validation=checked.validation),
            extras=DoneExtras(stopped=True, reason=reason, latency_ms=latency_ms),
        )

    async def _end_buffer(self, turn_id: uuid.UUID, done: dict[str, Any]) -> None:
        try:
            await append_terminal(self.buffer, turn_id, "done", done)
        except Exception:
            logger.warning("could not end an orphaned turn's stream buffer", exc_info=True)

    async def _record_answer(
        self, orphan: Orphan, done: DoneEvent, sources: list[PublicSource]
    ) -> None:
        if orphan.idempotency_key is None:
            return
        response = ChatResponse.of(done, sources).model_dump(mode="json")
        try:
            await self.idempotency.record_orphan_answer(
                orphan.idempotency_key, orphan.user_id, orphan.turn_id, response
            )
        except Exception:
            logger.warning("could not record an orphaned turn's answer", exc_info=True)
