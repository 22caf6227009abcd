"""A run's lifecycle: the turn runs in its own task, its events are numbered and read through
a queue (and written to the stream's buffer), and the run is stopped, detached or left to
finish when its client goes away.

The queue of a streamed run is bounded (`backlog` events, ADR 0083): the model writes faster
than a slow client reads, and unbounded, the queue held the whole answer for every slow
client. A client that falls `backlog` events behind is let go: the queue is emptied and
`next()` raises `FellBehind`; its stream goes on from the run's buffer (`local.py`).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import cast

from app.conversation.pipeline.runner import PreparedTurn
from app.conversation.streaming.buffer import TERMINAL_EVENTS, BufferedEvent, BufferWriter
from app.conversation.turn.events import DoneEvent, DoneExtras, TurnEvent
from app.conversation.turn.types import PublicSource, TurnMeta, Usage
from app.llm.tokens import count_tokens
from app.observability import metrics

logger = logging.getLogger(__name__)

# Runs whose client went away, finishing their cancellation (strong references: see asyncio).
_RUNNING: set[asyncio.Task[None]] = set()


@dataclass
class RunOutcome:
    """What a run produced, for the work done once it ends (idempotency record, quota)."""

    turn: PreparedTurn
    meta: TurnMeta | None = None
    sources: list[PublicSource] = field(default_factory=list)
    terminal: TurnEvent | None = None
    partial: list[str] = field(default_factory=list)
    """The streamed answer text, piece by piece."""

    def spent(self) -> Usage:
        """The usage of a run that did not complete: its prompt (once built) and what it
        streamed, both counted with the tokenizer."""
        prompt = self.turn.spend.prompt_tokens
        # Without streamed tokens (`/chat`), what the runner kept of the answer.
        answered = "".join(self.partial) or self.turn.ending.answer or ""
        completion = count_tokens(answered)
        return Usage(
            prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
        )


Finisher = Callable[[RunOutcome], Awaitable[None]]
Follow = Callable[[uuid.UUID, int], AsyncIterator[BufferedEvent | None]]
"""A turn's buffered events after an id, then its live ones (None: a silence): `BufferTail`."""


class FellBehind(Exception):
    """The client reads a run's events slower than they come: its queue was let go."""


class _Behind:
    """The marker left in a queue that was let go."""


_BEHIND = _Behind()


class RunHandle:
    """A turn running in its own task, its events numbered here and read through a queue.

    The run lives outside the request's (anyio) cancel scope: when it must end it is cancelled
    exactly once and cleans up as a plain asyncio task would — cancelling the graph's node
    tasks, and with them the model call. Its context is copied, so the request id still
    reaches logs. Events also go to the stream's Redis buffer (when given) for resume.
    """

    def __init__(
        self,
        turn: PreparedTurn,
        events: AsyncIterator[TurnEvent],
        writer: BufferWriter | None = None,
        finishers: tuple[Finisher, ...] = (),
        *,
        backlog: int | None = None,
        follow: Follow | None = None,
    ) -> None:
        self.turn = turn
        self.writer = writer
        self.finishers = finishers
        self.backlog = backlog
        """Events the queue may hold before its reader counts as behind (None: unbounded,
        for `/chat`, whose reader is this process)."""
        self.follow = follow
        """How a reader that fell behind follows the buffer instead."""
        self.outcome = RunOutcome(turn)
        self.queue: asyncio.Queue[tuple[int, TurnEvent] | _Behind | None] = asyncio.Queue()
        self.listening = True  # a local client reads the queue
        self.behind = False  # ... or did, until it fell behind
        self.let_finish = False  # a slow client was let go: the run finishes without it
        self.stop_requested = False
        self.stop_reason: str | None = None
        self.attached_at = 0.0  # when a remote (resuming) client last said it is there
        self._watchdog: asyncio.Task[None] | None = None
        self._finishing: asyncio.Task[None] | None = None
        self.task = asyncio.create_task(self._produce(events), context=contextvars.copy_context())
        _RUNNING.add(self.task)
        self.task.add_done_callback(_RUNNING.discard)

    async def _produce(self, events: AsyncIterator[TurnEvent]) -> None:
        event_id = 0
        try:
            try:
                async for event in events:
                    event_id += 1
                    self._emit(event_id, event)
            except asyncio.CancelledError:
                if not self.stop_requested:
                    raise
                # Stopped on purpose: the runner has stored the turn incomplete; say so.
                current = asyncio.current_task()
                if current is not None:
                    current.uncancel()
                self._emit(event_id + 1, self._stopped_event())
        finally:
            self.queue.put_nowait(None)
            if self.writer is not None:
                self.writer.close()
            await self.settled()

    def _emit(self, event_id: int, event: TurnEvent) -> None:
        outcome = self.outcome
        if event.name == "token":
            outcome.partial.append(event.data["text"])
        elif event.name == "meta":
            outcome.meta = cast(TurnMeta, event.data)
        elif event.name == "sources":
            outcome.sources = event.data["sources"]
        elif event.name in TERMINAL_EVENTS:
            outcome.terminal = event
        if self.listening and not self.behind:
            self._offer(event_id, event)
        if self.writer is not None:
            self.writer.append(event_id, event.name, event.data)
        if outcome.terminal is not None:
            # The outcome is complete: quota and idempotency record need not wait for the
            # graph's last checkpoint write.
            self.settled()

    def _offer(self, event_id: int, event: TurnEvent) -> None:
        if self.backlog is None or self.queue.qsize() < self.backlog:
            self.queue.put_nowait((event_id, event))
            return
        # The client reads slower than the turn is written: free what it has not read; it
        # goes on from the buffer (or is told it cannot).
        self.behind = True
        while not self.queue.empty():
            self.queue.get_nowait()
        self.queue.put_nowait(_BEHIND)
        metrics.STREAMS_BEHIND.labels(reader="local").inc()

    def _stopped_event(self) -> TurnEvent:
        turn = self.turn
        # The runner checked the partial answer as it stored it (turn.ending).
        ending = turn.ending
        stored = ending.stored
        if stored is not None:
            # The turn was finished before the stop took effect (persist's commit landed as
            # it arrived, or another process finished it): tell what is stored.
            return stored.event()
        extras = DoneExtras(stopped=True, turn_ms=round((time.time() - turn.started_at) * 1000, 3))
        if self.stop_reason:
            extras["reason"] = self.stop_reason
        return DoneEvent(
            turn_id=turn.turn_id,
            session_id=turn.session_id,
            status="incomplete",
            answer="".join(self.outcome.partial) if ending.answer is None else ending.answer,
            query_composition=self.outcome.meta["query_composition"] if self.outcome.meta else None,
            usage=self.outcome.spent(),
            context_metadata=ending.manifest.public(),
            extras=extras,
        ).event()

    def settled(self) -> asyncio.Task[None]:
        """The finishers' work (started once, when the outcome is known): a `/chat` answer
        leaves once it is done."""
        if self._finishing is None:
            self._finishing = asyncio.create_task(self._finish())
        return self._finishing

    async def _finish(self) -> None:
        for finisher in self.finishers:
            try:
                await finisher(self.outcome)
            except Exception:
                logger.exception("could not finish the run", extra={"turn": str(self.turn.turn_id)})

    @property
    def finished(self) -> bool:
        """Whether the run is over (or its outcome known)."""
        return self.task.done() or self.outcome.terminal is not None

    async def next(self, wait_seconds: float | None = None) -> tuple[int, TurnEvent] | None:
        """The next (id, event); None at the end. TimeoutError after `wait_seconds` of silence;
        `FellBehind` once the reader is `backlog` events behind."""
        item = await asyncio.wait_for(self.queue.get(), wait_seconds)
        if isinstance(item, _Behind):
            raise FellBehind
        return item

    def cancel(self) -> None:
        """Cancel the run (it stores the turn incomplete)."""
        if not self.task.done():
            self.task.cancel()  # it finishes on its own (the turn is marked incomplete)

    def stop(self, reason: str | None = None) -> bool:
        """Stop generation on request: the stream ends with `done` marked stopped (with
        `reason`, e.g. "shutdown", when the client did not ask for it)."""
        if self.finished:
            return False
        self.stop_requested = True
        self.stop_reason = reason
        self.cancel()
        return True

    def detach(self, grace_seconds: float) -> None:
        """The local client went away. Without a way to resume, stop now; otherwise wait
        `grace_seconds` for a resuming client (any process) to say it is there."""
        self.listening = False
        while not self.queue.empty():  # nobody will read them: free them now
            self.queue.get_nowait()
        if self.finished or self.let_finish:
            return
        if grace_seconds <= 0 or self.writer is None or self.writer.failed:
            self.cancel()
            return
        self.attached_at = time.monotonic()
        self._watchdog = asyncio.create_task(self._cancel_when_unwatched(grace_seconds))

    async def _cancel_when_unwatched(self, grace_seconds: float) -> None:
        while not self.task.done():
            remaining = self.attached_at + grace_seconds - time.monotonic()
            if remaining <= 0:
                logger.info("no client resumed the stream: stopping it")
                self.cancel()
                return
            await asyncio.sleep(remaining)
