"""The runs of this process, and the Redis channels that let any process reach them.

A stop request or a resuming client may arrive at a process other than the one generating
the answer. Every process listens on a shared control channel (a resuming client announces
itself there: the process that runs the turn notes it) and on its own channel, named after
its process id, which is the turn's lease owner: a stop is published there, so "somebody
received it" means "the process running the turn received it" (docs/adr/0016).

At shutdown every local run is stopped as a stop request would (the stream ends with `done`,
status `incomplete`, partial answer kept), and resuming clients are told to reconnect.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator

from app.conversation.pipeline.runner import PreparedTurn
from app.conversation.streaming.buffer import StreamBuffer
from app.conversation.streaming.run import Finisher, RunHandle
from app.conversation.streaming.tail import BufferTail
from app.conversation.turn.events import TurnEvent
from app.core.process import process_id
from app.core.redis import RedisHandle

logger = logging.getLogger(__name__)

STOP, ATTACH = "stop", "attach"
ANNOUNCE_EVERY_SECONDS = 1.0
_ANNOUNCED_KEPT = 1000
_STOP_ATTEMPTS, _STOP_RETRY_SECONDS = 3, 0.6
BACKLOG_EVENTS = 256
"""The default of `THREADLINE_SSE_BACKLOG_EVENTS`."""


def owner_of(turn: PreparedTurn) -> str:
    """Who may resume the turn's stream: "tenant:user"."""
    return f"{turn.tenant_id}:{turn.user_id}"


def _stop_soon(run: RunHandle) -> None:
    """Stop `run` once its task has taken its first step: a task cancelled before it starts
    never runs its cleanup (no turn stored, no `done`)."""
    asyncio.get_running_loop().call_soon(run.stop, "shutdown")


class StreamHub:
    """This process's runs, and the Redis channels that stop or attach to any process's."""

    def __init__(
        self, redis: RedisHandle, buffer: StreamBuffer, backlog_events: int = BACKLOG_EVENTS
    ) -> None:
        self.redis = redis
        self.buffer = buffer
        self.backlog_events = backlog_events
        """Events a stream's reader may be behind before it reads the buffer in pages."""
        self.tail = BufferTail(buffer, redis.dedicated_client(), backlog_events)
        """The one reader that resumed streams of this process wait on."""
        self._announced: dict[uuid.UUID, float] = {}
        self.runs: dict[uuid.UUID, RunHandle] = {}
        self.channel = redis.key("stream-control")
        self.own_channel = self.owner_channel(process_id())
        self._listener: asyncio.Task[None] | None = None
        self._closing = False
        self._writers: set[asyncio.Task[None]] = set()
        self.shutting_down = asyncio.Event()
        """Set at shutdown: resuming clients end, new runs are stopped at once."""

    def owner_channel(self, owner: str) -> str:
        """The control channel of the process that owns a lease."""
        return self.redis.key("stream-control", owner)

    def running(self) -> list[tuple[uuid.UUID, uuid.UUID]]:
        """(tenant, turn) of the runs of this process."""
        return [(run.turn.tenant_id, turn_id) for turn_id, run in list(self.runs.items())]

    def start(
        self,
        turn: PreparedTurn,
        events: AsyncIterator[TurnEvent],
        *,
        buffered: bool,
        finishers: tuple[Finisher, ...] = (),
    ) -> RunHandle:
        """Start a run of `turn` (buffered for resume when `buffered`)."""
        writer = self.buffer.writer(turn.turn_id, owner_of(turn)) if buffered else None
        # A stream's client may fall behind (ADR 0083); `/chat`'s reader is this process.
        backlog = self.backlog_events if buffered else None
        run = RunHandle(turn, events, writer, finishers, backlog=backlog, follow=self.tail.follow)
        if writer is not None:
            self._writers.add(writer.task)
            writer.task.add_done_callback(self._writers.discard)
        self.runs[turn.turn_id] = run
        run.task.add_done_callback(lambda _: self.runs.pop(turn.turn_id, None))
        if self.shutting_down.is_set():  # admitted as the process began to stop
            _stop_soon(run)
        return run

    async def stop(self, turn_id: uuid.UUID, owner: str | None = None) -> bool:
        """Stop a turn wherever it runs: here directly, elsewhere through its owner's channel
        (the shared one for a turn without an owner). False when no process received the
        stop: the owner is gone."""
        run = self.runs.get(turn_id)
        if run is not None:
            run.stop()
            return True
        channel = self.channel if owner is None else self.owner_channel(owner)
        # An owner whose listener is resubscribing (it retries a second after a Redis blip)
        # receives nothing for a moment: ask again before calling it gone, since a "gone"
        # owner's turn is then finished by force while it may still be running.
        for attempt in range(_STOP_ATTEMPTS):
            if int(await self.redis.client.publish(channel, f"{STOP}:{turn_id}")) > 0:
                return True
            if attempt < _STOP_ATTEMPTS - 1:
                await asyncio.sleep(_STOP_RETRY_SECONDS)
        return False

    def begin_shutdown(self) -> None:
        """Stop every local run (each ends its stream with `done`, status incomplete) and
        tell resuming clients to go elsewhere. Safe to call more than once."""
        self.shutting_down.set()
        for run in list(self.runs.values()):
            _stop_soon(run)

    async def drain(self, wait_seconds: float) -> None:
        """Wait (bounded) for the stopped runs to store their turns and for their buffers
        to be written: the last event must reach Redis before the process exits."""
        self.begin_shutdown()
        tasks = [run.task for run in list(self.runs.values())]
        if tasks:
            await asyncio.wait(tasks, timeout=wait_seconds)
        tasks = list(self._writers)  # the runs' last events, on their way to Redis
        if tasks:
            await asyncio.wait(tasks, timeout=wait_seconds)

    async def announce_attached(self, turn_id: uuid.UUID) -> None:
        """A resuming client follows this turn: its generation must not time out. Published
        at most once a second per turn, however many clients of this process follow it."""
        run = self.runs.get(turn_id)
        now = time.monotonic()
        if run is not None:
            run.attached_at = now
            return
        if now - self._announced.get(turn_id, 0.0) < ANNOUNCE_EVERY_SECONDS:
            return
        self._announced[turn_id] = now
        if len(self._announced) > _ANNOUNCED_KEPT:  # forget turns announced long ago
            self._announced = {
                turn: at
                for turn, at in self._announced.items()
                if now - at < ANNOUNCE_EVERY_SECONDS
            }
        with contextlib.suppress(Exception):  # no Redis: nothing could be resumed anyway
            await self.redis.client.publish(self.channel, f"{ATTACH}:{turn_id}")

    def _handle(self, message: str) -> None:
        action, _, raw_id = message.partition(":")
        try:
            run = self.runs.get(uuid.UUID(raw_id))
        except ValueError:
            return
        if run is None:
            return
        if action == STOP:
            run.stop()
        elif action == ATTACH:
            run.attached_at = time.monotonic()

    def start_listening(self) -> None:
        """Listen on the control channels (stop, attach) in the background."""
        self._listener = asyncio.create_task(self._listen())

    async def _listen(self) -> None:
        while not self._closing:
            try:
                async with self.redis.client.pubsub() as pubsub:  # closed on the way out
                    await pubsub.subscribe(self.channel, self.own_channel)
                    while not self._closing:
                        message = await pubsub.get_message(
                            ignore_subscribe_messages=True, timeout=0.5
                        )
                        if message is not None and message["type"] == "message":
                            data = message["data"]
                            self._handle(data.decode() if isinstance(data, bytes) else data)
            except Exception:  # Redis down: local stops still work; try again shortly
                if not self._closing:
                    await asyncio.sleep(1.0)

    async def close(self) -> None:
        # A flag as well as the cancel: Redis clients may turn a cancellation into a
        # connection error, which the loop would otherwise retry forever.
        """Stop listening."""
        self._closing = True
        if self._listener is not None:
            self._listener.cancel()
            await asyncio.wait([self._listener], timeout=2.0)
        await self.tail.close()
