"""Runs one turn through the graph and turns its progress into events.

Events, in order: `meta` (after retrieval: session, turn, composition), `token`…, `sources`,
`done`; or `error` at any point. A cancelled run (the client went away) stores the turn
`incomplete` with its partial answer; a failed one stores it `failed`. Either way the model
call is cancelled with the run: no token is generated after that, and the partial answer goes
through the same output checks as a complete one before it is stored (or returned by a
stopped stream's `done`).

Over 300 lines because a turn's three endings (complete, cancelled, failed) and the
checks of a partial answer belong to one lifecycle; splitting them would scatter it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.types import Overwrite, StreamMode

from app.conversation.checkpoints.checkpointer import CURRENT_TENANT, TURN_READ
from app.conversation.pipeline.answer_check import check_answer
from app.conversation.pipeline.build import NODE_TIMINGS, TurnGraph
from app.conversation.pipeline.context import TURN_READS, TurnContext, TurnReads
from app.conversation.pipeline.state import (
    TurnUpdate,
    add_sections,
    initial_state,
    public_triage,
)
from app.conversation.repository import TurnRepository
from app.conversation.repository.turns import TurnNotOwned
from app.conversation.turn.events import DoneEvent, DoneExtras, TurnEvent
from app.conversation.turn.manifest import Manifest, SourcesSection, TimingsSection
from app.conversation.turn.manifest_records import TurnError
from app.conversation.turn.schemas import public_source
from app.conversation.turn.stored import stored_response
from app.conversation.turn.types import ChatMessage, PublicSource, SourceRef, TurnMeta
from app.core.db_outage import is_db_unavailable, retry_through_outage
from app.core.errors import AppError, ServiceUnavailable
from app.core.json_types import JsonObject
from app.limits.limiter import Reservation
from app.llm.tokens import count_tokens
from app.observability.tracing import Tracing
from app.pii.detect import anonymize

logger = logging.getLogger(__name__)

# Finishing writes that must survive the cancellation of the request that started them.
_BACKGROUND: set[asyncio.Task[None]] = set()


async def drain_background(wait_seconds: float = 10.0) -> None:
    """Wait (bounded) for the writes that finish cancelled or failed turns: at shutdown."""
    if _BACKGROUND:
        await asyncio.wait(list(_BACKGROUND), timeout=wait_seconds)


@dataclass
class TurnSpend:
    """What a turn has cost before it is done, for the quota of a run that does not finish."""

    prompt_tokens: int = 0
    """The answer prompt's tokens, counted once it is built (before the model is called)."""


@dataclass
class TurnEnding:
    """How a turn that ended early ended, set by the runner: the checked partial `answer` and
    its part of the manifest (triage, validation, the sources it was written from, the audit's
    original), for the stopped stream's `done` event; and `stored`, the `DoneEvent` read back
    from the row when the turn had already been finished (by this run's final write,
    committed as the stop landed, or by another process): what the client is told then."""

    answer: str | None = None
    manifest: Manifest = field(default_factory=Manifest)
    stored: DoneEvent | None = None


@dataclass(frozen=True)
class PreparedTurn:
    """An admitted turn, ready to run: who, where, what was asked."""

    tenant_id: uuid.UUID
    user_id: uuid.UUID
    session_id: uuid.UUID
    turn_id: uuid.UUID
    messages: list[ChatMessage]
    attachment_ids: list[uuid.UUID]
    session_attachment_ids: list[uuid.UUID]
    """The attachments already active in the session when the turn was admitted."""
    collections: list[uuid.UUID]
    """The knowledge-base collections the turn may search: the caller's, read with the
    request, within the session's scope (ADR 0086)."""
    collection_scope: list[uuid.UUID]
    """The collections the session is restricted to (empty: not restricted)."""
    stored_query: str
    """The user's message as stored (anonymised when configured)."""
    finished_turns: int = -1
    """The session's finished turns at admission (-1: not counted)."""
    started_at: float = field(default_factory=time.time)
    ending: TurnEnding = field(default_factory=TurnEnding, compare=False)
    """Set by the runner when the turn ends early (`TurnEnding`)."""
    spend: TurnSpend = field(default_factory=TurnSpend, compare=False)
    reservation: Reservation | None = None
    """The tokens held against the quotas at admission, settled when the turn ends (None:
    admitted while Redis was down)."""


@dataclass
class _Progress:
    partial: list[str] = field(default_factory=list)
    state: TurnUpdate = field(default_factory=TurnUpdate)
    """The nodes' updates so far, but for the manifest (below)."""
    manifest: JsonObject = field(default_factory=dict)
    """The turn's manifest as the client is told it: every node's sections merged by the
    graph's own reducer (also persist's, which replaces the checkpoint's copy)."""
    node_ms: dict[str, float] = field(default_factory=dict)
    """Time inside each node; the rest of a turn is the framework and the checkpointer."""
    meta_sent: bool = False


META_AFTER = frozenset({"retrieve", "build_context"})


def public_sources(sources: list[SourceRef], manifest: Manifest) -> list[PublicSource]:
    """The sources as the client sees them: snippets, rounded scores, whether cited."""
    from app.core.text import snippet

    cited = set(manifest.citations.cited if manifest.citations else [])
    return [public_source({**s, "snippet": snippet(s["text"])}, cited) for s in sources]


class TurnRunner:
    """Runs turns through the compiled graph and turns their progress into events."""

    def __init__(
        self, graph: TurnGraph, context: TurnContext, tracing: Tracing | None = None
    ) -> None:
        self.graph = graph
        self.context = context
        self.tracing = tracing

    async def run(
        self, turn: PreparedTurn, *, stream_tokens: bool = True
    ) -> AsyncIterator[TurnEvent]:
        """The turn's events; without `stream_tokens` the answer arrives whole (no `token`
        events, and a cancelled run has no partial answer)."""
        progress = _Progress()
        state = initial_state(
            tenant_id=turn.tenant_id,
            user_id=turn.user_id,
            session_id=turn.session_id,
            turn_id=turn.turn_id,
            messages=turn.messages,
            attachment_ids=turn.attachment_ids,
            session_attachment_ids=turn.session_attachment_ids,
            stored_query=turn.stored_query,
            finished_turns=turn.finished_turns,
            collections=turn.collections,
            collection_scope=turn.collection_scope,
            started_at=turn.started_at,
            stream_tokens=stream_tokens,
        )
        # thread_id is the session id, always: one checkpoint thread per conversation.
        config: RunnableConfig = {"configurable": {"thread_id": str(turn.session_id)}}
        if self.tracing is not None:
            config |= self.tracing.config_for(
                str(turn.tenant_id), str(turn.session_id), str(turn.user_id)
            )
        # Token events travel in LangGraph's custom stream; without tokens to stream, that
        # mode's per-task plumbing is not set up at all.
        modes: list[StreamMode] = ["updates", "custom"] if stream_tokens else ["updates"]
        # Set for the tasks this run creates (they copy the context); not reset with tokens:
        # an async generator may be finalised in another context.
        CURRENT_TENANT.set(str(turn.tenant_id))
        NODE_TIMINGS.set(progress.node_ms)
        reads = TurnReads(self.context, turn.tenant_id, turn.collections)
        TURN_READS.set(reads)  # the reads before the model share one transaction (ADR 0070)
        TURN_READ.set(reads.use)  # the thread's checkpoint is one of them
        stored = False  # set once `done` went out: later failures do not un-store the turn
        try:
            async for item in self.graph.astream(
                state,
                config,
                context=self.context,
                stream_mode=modes,
                durability="exit",
            ):
                mode, chunk = cast(tuple[str, Any], item)  # (mode, payload) with several modes
                if mode == "custom":
                    progress.partial.append(chunk["token"])
                    yield TurnEvent("token", {"text": chunk["token"]})
                    continue
                for node, update in cast(dict[str, TurnUpdate | None], chunk).items():
                    _apply(progress, update or TurnUpdate())
                    if update and update.get("prompt"):
                        turn.spend.prompt_tokens = sum(
                            count_tokens(m["content"]) for m in update["prompt"]
                        )
                    event = self._event_after(node, turn, progress)
                    if event is not None:
                        stored = stored or event.name == "done"
                        yield event
        except asyncio.CancelledError:
            if not stored:
                # persist's commit may have landed as the cancellation did (before or after
                # persist returned): the finish then writes nothing, reads the row back, and
                # the row, not this ending, is what the stopped stream tells
                # (turn.ending.stored).
                await self._finish_in_background(turn, "incomplete", progress)
            raise
        except Exception as exc:
            if not stored and "persist" in progress.node_ms:
                # persist committed the turn, and the graph failed after it (its checkpoint
                # write) before persist's update came out: the answer stands.
                stored = True
                progress.manifest.setdefault(
                    "latency_ms", int((time.time() - turn.started_at) * 1000)
                )
                done = self._event_after("persist", turn, progress)
                if done is not None:
                    yield done
            if stored:  # e.g. the final checkpoint write: the turn itself is complete
                logger.warning("turn stored, but its checkpoint was not", exc_info=exc)
                return
            if isinstance(exc, TurnNotOwned):
                logger.warning(
                    "turn finished by another process (its lease expired while it ran here): "
                    "telling what is stored",
                    extra={"turn": str(turn.turn_id)},
                )
            await self._finish_in_background(turn, "failed", progress, error=exc)
            already = turn.ending.stored
            if already is not None:  # finished before this ending: that stands
                yield already.event()
                return
            yield _error_event(exc)
        finally:
            TURN_READS.set(None)
            TURN_READ.set(None)
            NODE_TIMINGS.set(None)
            CURRENT_TENANT.set(None)
            try:
                await reads.close()  # a run that ended before its model call
            except Exception:  # a read-only transaction: nothing is lost with it
                logger.warning("the turn's read transaction did not close", exc_info=True)

    def _event_after(self, node: str, turn: PreparedTurn, progress: _Progress) -> TurnEvent | None:
        state = progress.state
        # meta goes out once, before any token: after retrieval (both paths retrieve, ADR
        # 0041); for an early answer as soon as triage decided on it.
        early = node == "triage" and state["triage"]["skip_llm"]
        if (node in META_AFTER or early) and not progress.meta_sent:
            progress.meta_sent = True
            meta = TurnMeta(
                session_id=str(turn.session_id),
                turn_id=str(turn.turn_id),
                query_composition=state.get("query_composition", "chat"),
            )
            return TurnEvent("meta", dict(meta))
        if node in ("validate_output", "answer_early"):
            manifest = Manifest.read(progress.manifest)
            return TurnEvent(
                "sources", {"sources": public_sources(state.get("sources", []), manifest)}
            )
        if node == "persist":
            metadata = Manifest.read(progress.manifest).public()
            return DoneEvent(
                turn_id=turn.turn_id,
                session_id=turn.session_id,
                status="complete",
                answer=state["answer"],
                query_composition=state["query_composition"],
                usage=state["usage"],
                context_metadata=metadata,
                extras=DoneExtras(
                    model=state["model"],
                    latency_ms=metadata.latency_ms,
                    node_ms=progress.node_ms,
                    turn_ms=round((time.time() - turn.started_at) * 1000, 3),
                ),
            ).event()
        return None

    async def _finish_in_background(
        self,
        turn: PreparedTurn,
        status: str,
        progress: _Progress,
        error: BaseException | None = None,
    ) -> None:
        # Without streamed tokens (`/chat`) the partial answer is what generate produced, if
        # it finished.
        partial = "".join(progress.partial) or progress.state.get("answer", "")
        ending = self._check_partial(partial, progress)
        turn.ending.answer, turn.ending.manifest = ending.answer, ending.manifest
        task = asyncio.create_task(self._finish(turn, status, ending, error))
        _BACKGROUND.add(task)
        task.add_done_callback(_BACKGROUND.discard)
        with contextlib.suppress(asyncio.CancelledError):  # the task goes on regardless
            await asyncio.shield(task)

    def _check_partial(self, partial: str, progress: _Progress) -> TurnEnding:
        """The partial answer through the output checks (incomplete turns are history too);
        with the triage and validation records as a complete turn has them."""
        state = progress.state
        checked = check_answer(
            partial, state.get("query", ""), state.get("sources", []), self.context.settings
        )
        # With no issue found it is kept as streamed (the checks also trim surrounding space).
        guardrail = checked.validation.output_guardrail
        altered = bool(guardrail and guardrail.issues)
        manifest = Manifest(validation=checked.validation)
        if "triage" in state:
            manifest.triage = public_triage(state["triage"])
        # The sources the answer was being written from stay with it: a stopped answer
        # offers them as a finished one does (issue 28, item 4).
        retrieved = Manifest.read(progress.manifest).sources
        if retrieved:
            manifest = manifest.merged(SourcesSection(sources=retrieved))
        if altered and checked.audit is not None:
            manifest.audit = checked.audit
        return TurnEnding(answer=checked.text if altered else partial, manifest=manifest)

    async def _finish(
        self, turn: PreparedTurn, status: str, ending: TurnEnding, error: BaseException | None
    ) -> None:
        """Mark a turn that did not complete, keeping what was generated (checked). A turn
        already finished (its final write committed, or another process finished it) is
        left as stored, and what is stored goes to `turn.ending.stored`."""
        ctx = self.context
        partial = ending.answer or ""
        answer = anonymize(partial).text if ctx.settings.pii_anonymize else partial
        timings = TimingsSection(latency_ms=int((time.time() - turn.started_at) * 1000))
        if error is not None:
            timings.error = TurnError(code=_error_code(error), type=type(error).__name__)
        manifest = Manifest.model_validate(timings.dump()).merged(ending.manifest)

        async def write() -> DoneEvent | None:
            async with ctx.transaction(turn.tenant_id) as db:
                turns = TurnRepository(db, turn.tenant_id)
                written = await turns.finish_unfinished(
                    turn.turn_id,
                    status=status,
                    answer=answer,
                    manifest=manifest,
                )
                if written:
                    return None
                # Not pending any more: the UPDATE waited for any write in flight on the row
                # (a commit racing the stop), so this read sees its outcome.
                row = await turns.get(turn.turn_id)
                if row is None or row.status == "pending":
                    return None
                return stored_response(row).done_event()

        try:
            # Through a database outage too: else the turn stays pending until its lease ends.
            budget = ctx.settings.db_write_retry_seconds
            stored = await retry_through_outage(write, budget_seconds=budget, what="finish turn")
            if stored is not None:
                turn.ending.stored = stored
            async with ctx.transaction(turn.tenant_id) as db:
                await ctx.history.refresh(db, turn.tenant_id, turn.session_id)
        except Exception:
            logger.exception("could not record the end of turn", extra={"turn": str(turn.turn_id)})


def _apply(progress: _Progress, update: TurnUpdate) -> None:
    """A node's update, as the turn's outcome sees it: its manifest sections merged in by the
    state's reducer (also persist's, which replaces the checkpoint's copy but adds to what the
    client is told)."""
    rest = update.copy()  # the graph's own update: not changed here
    sections = rest.pop("context_metadata", None)
    progress.state.update(rest)
    if isinstance(sections, Overwrite):
        progress.manifest = add_sections(progress.manifest, cast(JsonObject, sections.value))
    elif sections is not None:
        progress.manifest = add_sections(progress.manifest, sections)


def _error_code(error: BaseException) -> str:
    if isinstance(error, AppError):
        return error.code
    return "database_unavailable" if is_db_unavailable(error) else "generation_failed"


def _error_event(error: Exception) -> TurnEvent:
    if is_db_unavailable(error):  # e.g. history or the checkpoint could not be read
        logger.warning("turn failed: database unavailable", exc_info=error)
        error = ServiceUnavailable(
            "The database is unavailable; the turn was not answered. Retry shortly.",
            code="database_unavailable",
        )
    if isinstance(error, AppError):
        return TurnEvent("error", {"code": error.code, "message": error.message}, error.status_code)
    logger.error("turn failed", exc_info=error)
    return TurnEvent(
        "error",
        {
            "code": "generation_failed",
            "message": "The answer could not be generated; the turn was recorded as failed.",
        },
        502,
    )
