"""One reader of the stream buffers for every resumed stream of this process.

A resumed stream used to wait for its next event in a blocking XREAD of its own, each holding
a connection of the shared Redis pool for as long as the stream lived: 300 resumes of one
slow turn took the whole pool, and every tenant's `/chat` got 503 while logins waited
seconds (issue 33). Now a follower reads what is already buffered with one short XRANGE
through the pool, then waits on a queue of its own; one task (`BufferTail`) blocks in a
single XREAD over every followed turn, on a connection outside the pool, and hands each new
event to that turn's followers. However many clients follow, this process holds one
connection for it.

A follower registers before it reads the backlog, so nothing falls between the two: an
event the tail reads later than the backlog reaches the queue, and one it read earlier is in
the backlog; the follower skips what it has already sent. A Redis error reaches every
follower, which ends its stream with `resume_unavailable` (the client resumes again).

A follower holds at most `backlog` events (ADR 0083). The tail hands events to every follower
as it reads them, whatever their pace; one whose client reads slower than the turn is written
would queue the whole answer. So a follower that would go past `backlog` is dropped from the
live read, its queue emptied, and told so: it reads on from the buffer in pages of
`PAGE_EVENTS` (one XRANGE each, at its client's pace) and joins the live read again once a page
comes back short. Exactly once, in order: it skips every id it has already sent.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

from redis.asyncio import Redis

from app.conversation.streaming.buffer import BufferedEvent, StreamBuffer, decode_entry
from app.observability import metrics

logger = logging.getLogger(__name__)

BLOCK_MS = 200
"""One XREAD's wait: a turn that starts being followed joins the read within this, and the
follower reports a silence (for heartbeats) no later than `SILENCE_SECONDS`."""
SILENCE_SECONDS = 0.5
_ERROR_PAUSE_SECONDS = 0.5
PAGE_EVENTS = 128
"""Events read from the buffer at a time by a follower catching up (its backlog, or after it
fell behind): what one slow follower holds beside its queue."""


class _Behind:
    """The marker a follower finds when it fell behind and was dropped from the live read."""


BEHIND = _Behind()

Item = BufferedEvent | BaseException | _Behind


class BufferTail:
    """This process's one blocking reader of the followed stream buffers."""

    def __init__(self, buffer: StreamBuffer, reader: Redis, backlog: int) -> None:
        self.buffer = buffer
        self.reader = reader
        """A client with a connection of its own (never the shared pool's)."""
        self.backlog = backlog
        """Events a follower may have queued before it is dropped to reading pages."""
        self._followers: dict[uuid.UUID, set[asyncio.Queue[Item]]] = {}
        self._cursors: dict[uuid.UUID, int] = {}
        self._task: asyncio.Task[None] | None = None

    def followed(self) -> int:
        """How many streams this process follows now (for tests and metrics)."""
        return sum(len(queues) for queues in self._followers.values())

    async def follow(self, turn_id: uuid.UUID, after: int) -> AsyncIterator[BufferedEvent | None]:
        """Every event after `after`, then the live ones as they arrive; None marks a silence
        of `SILENCE_SECONDS` (so the caller can send heartbeats and check for an end)."""
        sent = after
        while True:
            # Catch up page by page, at the client's pace, before joining the live read.
            while True:
                page = await self.buffer.read_after(turn_id, sent, PAGE_EVENTS)
                for event in page:
                    sent = event.event_id
                    yield event
                if len(page) < PAGE_EVENTS:
                    break
            queue: asyncio.Queue[Item] = asyncio.Queue()
            self._register(turn_id, queue, sent)
            try:
                # Registered before this read: an event written since the last page is in
                # it or reaches the queue (or both: ids already sent are skipped).
                page = await self.buffer.read_after(turn_id, sent, PAGE_EVENTS)
                for event in page:
                    if event.event_id > sent:
                        sent = event.event_id
                        yield event
                if len(page) == PAGE_EVENTS:
                    continue  # more came meanwhile than a page: read on from the buffer
                while True:
                    try:
                        item = await asyncio.wait_for(queue.get(), SILENCE_SECONDS)
                    except TimeoutError:
                        yield None
                        continue
                    if isinstance(item, _Behind):
                        break
                    if isinstance(item, BaseException):
                        raise item
                    if item.event_id > sent:
                        sent = item.event_id
                        yield item
            finally:
                self._unregister(turn_id, queue)
            # It fell behind and was dropped from the live read: read on from the buffer.

    def _register(self, turn_id: uuid.UUID, queue: asyncio.Queue[Item], after: int) -> None:
        queues = self._followers.setdefault(turn_id, set())
        queues.add(queue)
        # A turn already read keeps its cursor (the new follower's backlog covers the rest).
        self._cursors.setdefault(turn_id, after)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._read())

    def _unregister(self, turn_id: uuid.UUID, queue: asyncio.Queue[Item]) -> None:
        queues = self._followers.get(turn_id)
        if queues is None:
            return
        queues.discard(queue)
        if not queues:
            del self._followers[turn_id]
            self._cursors.pop(turn_id, None)

    async def _read(self) -> None:
        """Read every followed turn's new events until nobody follows any."""
        while self._followers:
            turns = list(self._cursors)
            streams: dict[Any, Any] = {
                self.buffer.events_key(turn): f"{self._cursors[turn]}-0" for turn in turns
            }
            keys = {self.buffer.events_key(turn): turn for turn in turns}
            try:
                answer: Any = await self.reader.xread(streams, block=BLOCK_MS)
            except Exception as exc:  # Redis gone or failing: every follower is told
                logger.warning("stream buffers cannot be read", exc_info=True)
                self._fail_all(exc)
                await asyncio.sleep(_ERROR_PAUSE_SECONDS)
                continue
            for raw_key, entries in answer or []:
                key = raw_key.decode() if isinstance(raw_key, bytes) else raw_key
                turn = keys.get(key)
                if turn is not None:
                    self._deliver(turn, [decode_entry(entry) for entry in entries])

    def _deliver(self, turn_id: uuid.UUID, events: list[BufferedEvent]) -> None:
        queues = self._followers.get(turn_id)
        if not queues or not events:
            return
        self._cursors[turn_id] = max(self._cursors.get(turn_id, 0), events[-1].event_id)
        for queue in list(queues):
            if queue.qsize() + len(events) > self.backlog:
                # Its client reads slower than the turn is written: it reads pages instead.
                _replace_contents(queue, BEHIND)
                self._unregister(turn_id, queue)
                metrics.STREAMS_BEHIND.labels(reader="follower").inc()
                continue
            for event in events:
                queue.put_nowait(event)

    def _fail_all(self, exc: BaseException) -> None:
        for queues in self._followers.values():
            for queue in queues:
                _replace_contents(queue, exc)  # what it held will not be sent

    async def close(self) -> None:
        """Stop reading and close the reader's connection."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait([task], timeout=2.0)
        if self.reader is not self.buffer.redis.client:
            await self.reader.aclose()


def _replace_contents(queue: asyncio.Queue[Item], item: Item) -> None:
    """Empty `queue` (freeing what it held) and leave `item` alone in it."""
    while not queue.empty():
        queue.get_nowait()
    queue.put_nowait(item)
