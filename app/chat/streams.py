"""The runs of this process, and the Redis channel that lets any process reach them.

A stop request or a resuming client may arrive at a process other than the one generating
the answer. Every process listens on one control channel; a message names a turn, and the
process that runs it acts (stop it, or note that a remote client is following it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator

from app.chat.runner import PreparedTurn, TurnEvent
from app.chat.sse import Finisher, RunHandle
from app.chat.stream_buffer import StreamBuffer
from app.core.redis import RedisHandle

logger = logging.getLogger(__name__)

STOP, ATTACH = "stop", "attach"


def owner_of(turn: PreparedTurn) -> str:
    return f"{turn.tenant_id}:{turn.user_id}"


class StreamHub:
    def __init__(self, redis: RedisHandle, buffer: StreamBuffer) -> None:
        self.redis = redis
        self.buffer = buffer
        self.runs: dict[uuid.UUID, RunHandle] = {}
        self.channel = redis.key("stream-control")
        self._listener: asyncio.Task[None] | None = None
        self._closing = False

    def start(
        self,
        turn: PreparedTurn,
        events: AsyncIterator[TurnEvent],
        *,
        buffered: bool,
        finishers: tuple[Finisher, ...] = (),
    ) -> RunHandle:
        writer = self.buffer.writer(turn.turn_id, owner_of(turn)) if buffered else None
        run = RunHandle(turn, events, writer, finishers)
        self.runs[turn.turn_id] = run
        run.task.add_done_callback(lambda _: self.runs.pop(turn.turn_id, None))
        return run

    async def stop(self, turn_id: uuid.UUID) -> bool:
        """Stop a turn wherever it runs: here directly, elsewhere through the channel. False
        when no process received the stop (none listens: nobody can be running the turn)."""
        run = self.runs.get(turn_id)
        if run is not None:
            run.stop()
            return True
        receivers = await self.redis.client.publish(self.channel, f"{STOP}:{turn_id}")
        return int(receivers) > 0

    async def announce_attached(self, turn_id: uuid.UUID) -> None:
        """A resuming client follows this turn: its generation must not time out."""
        run = self.runs.get(turn_id)
        if run is not None:
            run.attached_at = time.monotonic()
            return
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
        self._listener = asyncio.create_task(self._listen())

    async def _listen(self) -> None:
        while not self._closing:
            try:
                async with self.redis.client.pubsub() as pubsub:  # closed on the way out
                    await pubsub.subscribe(self.channel)
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
        self._closing = True
        if self._listener is not None:
            self._listener.cancel()
            await asyncio.wait([self._listener], timeout=2.0)
