"""A stream's events kept in Redis (a Redis Stream per turn) so any API process can replay
them after `Last-Event-ID` and follow the live rest.

Entry ids are `<event id>-0`, so "after event n" is simply "after entry n-0" (XREAD/XRANGE).
The generating process writes through one small task per stream that drains whatever has
queued up and sends it as one pipeline: a burst of tokens costs one round trip, and the
stream being read by its own client never waits on Redis. A failed write is retried for a
bounded time (`BufferWriter`); only then is the buffer given up, logged once: the stream goes
on, only without resume.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

from redis.typing import EncodableT, FieldT

from app.core.redis import RedisHandle
from app.pii.marks import is_erased

logger = logging.getLogger(__name__)

TERMINAL_EVENTS = frozenset({"done", "error"})
# A buffer is given up after its writes failed this long: longer than a Redis restart or a
# burst that exhausts the pool, far shorter than the buffer's life (resume after that).
GIVE_UP_SECONDS = 30.0
_RETRY_BASE, _RETRY_CAP = 0.05, 1.0
_WRITERS: set[asyncio.Task[None]] = set()


@dataclass(frozen=True)
class BufferedEvent:
    """One event as the stream's buffer holds it."""

    event_id: int
    name: str
    data: dict[str, Any]


class StreamBuffer:
    """The Redis Streams that hold every stream's events for resume."""

    def __init__(self, redis: RedisHandle, ttl_seconds: int) -> None:
        self.redis = redis
        self.ttl = ttl_seconds

    def events_key(self, turn_id: uuid.UUID) -> str:
        """The Redis key of the turn's events."""
        return self.redis.key("stream", turn_id, "events")

    def owner_key(self, turn_id: uuid.UUID) -> str:
        """The Redis key naming who may resume the turn."""
        return self.redis.key("stream", turn_id, "owner")

    def writer(self, turn_id: uuid.UUID, owner: str) -> BufferWriter:
        """A writer of the turn's events (one task per stream)."""
        return BufferWriter(self, turn_id, owner)

    async def owner(self, turn_id: uuid.UUID) -> str | None:
        """ "tenant:user" allowed to resume the turn; None when not buffered."""
        raw = await self.redis.client.get(self.owner_key(turn_id))
        return raw.decode() if isinstance(raw, bytes) else raw

    async def last_event(self, turn_id: uuid.UUID) -> BufferedEvent | None:
        """The newest buffered event of the turn."""
        entries: Any = await self.redis.client.xrevrange(self.events_key(turn_id), count=1)
        return decode_entry(entries[0]) if entries else None

    async def read_after(
        self, turn_id: uuid.UUID, after: int, count: int | None = None
    ) -> list[BufferedEvent]:
        """Events with an id above `after`, the first `count` of them when given (one XRANGE;
        never blocks: waiting for new ones is the tail's job, `streaming/tail.py`)."""
        entries: Any = await self.redis.client.xrange(
            self.events_key(turn_id), min=f"({after}-0", count=count
        )
        return [decode_entry(entry) for entry in entries]


# The end of a stream whose producer is gone (docs/adr/0016): appended after the last event
# unless the buffer is missing or already ended, atomically, so two processes finishing the
# same orphan cannot both end it. Returns the new event's id, or 0.
_APPEND_TERMINAL = """
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
local next_id = 1
if #last > 0 then
  local fields = last[1][2]
  for i = 1, #fields, 2 do
    if fields[i] == 'n' and (fields[i + 1] == 'done' or fields[i + 1] == 'error') then
      return 0
    end
  end
  next_id = tonumber(string.match(last[1][1], '^(%d+)')) + 1
end
redis.call('XADD', KEYS[1], next_id .. '-0', 'n', ARGV[1], 'd', ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('EXPIRE', KEYS[2], ARGV[3])
return next_id
"""


async def buffered_events(buffer: StreamBuffer, turn_id: uuid.UUID) -> list[BufferedEvent]:
    """Every event of the turn's buffer, in order (what an orphan's partial answer is
    recovered from)."""
    entries: Any = await buffer.redis.client.xrange(buffer.events_key(turn_id))
    return [decode_entry(entry) for entry in entries]


async def append_terminal(
    buffer: StreamBuffer, turn_id: uuid.UUID, name: str, data: dict[str, Any]
) -> int:
    """End the turn's buffered stream with `name` (done or error) on behalf of a producer
    that is gone; the event's id, or 0 when there is no buffer or it has already ended."""
    payload = json.dumps(data, separators=(",", ":"), default=str)
    keys = [buffer.events_key(turn_id), buffer.owner_key(turn_id)]
    result = await buffer.redis.client.eval(
        _APPEND_TERMINAL, 2, *keys, name, payload, str(buffer.ttl)
    )
    return int(result or 0)


def decode_entry(entry: tuple[Any, dict[Any, Any]]) -> BufferedEvent:
    """One Redis stream entry (id, fields) as the event it buffered."""
    entry_id, fields = entry
    raw_id = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
    name = fields[b"n"].decode() if b"n" in fields else fields["n"]
    data = fields[b"d"] if b"d" in fields else fields["d"]
    return BufferedEvent(int(raw_id.split("-")[0]), name, json.loads(data))


class BufferWriter:
    """Appends one stream's events, in order, without making the stream wait.

    A write that fails (a connection cut, a Redis restarting, no pooled connection free in
    time) is sent again with a growing pause; events that arrive meanwhile queue behind it,
    so none is dropped or reordered. Before a resend, the events Redis already holds are
    skipped (a write whose reply was lost did land). Only after `GIVE_UP_SECONDS` of failing
    writes is the buffer given up: the stream goes on, only without resume.
    """

    def __init__(self, buffer: StreamBuffer, turn_id: uuid.UUID, owner: str) -> None:
        self.buffer = buffer
        self.turn_id = turn_id
        self.key = buffer.events_key(turn_id)
        self.owner_key = buffer.owner_key(turn_id)
        self.owner = owner
        self.pending: asyncio.Queue[BufferedEvent | None] = asyncio.Queue()
        self.failed = False
        self._owner_written = False
        self.task = asyncio.create_task(self._write())
        # The writer may outlive its run while it retries: keep the task referenced.
        _WRITERS.add(self.task)
        self.task.add_done_callback(_WRITERS.discard)

    def append(self, event_id: int, name: str, data: dict[str, Any]) -> None:
        """Queue an event for the buffer (never waits on Redis)."""
        self.pending.put_nowait(BufferedEvent(event_id, name, data))

    def close(self) -> None:
        """No more events: the writer ends once the queue is written."""
        self.pending.put_nowait(None)

    async def _write(self) -> None:
        events: list[BufferedEvent] = []
        closed = False
        failing_since: float | None = None
        failures = 0
        while not (closed and not events):
            # The owner goes first (a client may ask to resume before the first event): the
            # first pass sends it without waiting for an event.
            if not events and not closed and (self._owner_written or self.failed):
                item = await self.pending.get()
                closed = item is None
                events.extend([item] if item is not None else [])
            while not self.pending.empty():
                item = self.pending.get_nowait()
                closed = closed or item is None
                events.extend([item] if item is not None else [])
            if self.failed or (self._owner_written and not events):
                events.clear()
                continue
            try:
                await self._send(events, resync=failures > 0)
            except Exception:
                now = time.monotonic()
                failing_since = now if failing_since is None else failing_since
                failures += 1
                if now - failing_since >= GIVE_UP_SECONDS:
                    self._fail()
                else:
                    await asyncio.sleep(min(_RETRY_CAP, _RETRY_BASE * 2 ** (failures - 1)))
                continue
            events.clear()
            failing_since, failures = None, 0
        await self._forget_if_erased()

    async def _send(self, events: list[BufferedEvent], *, resync: bool) -> None:
        """One pipeline: the owner (first time), the events, the expiries."""
        client, ttl = self.buffer.redis.client, self.buffer.ttl
        if resync and events:
            # The failed attempt may have landed in part: never send an event id twice.
            last = await self.buffer.last_event(self.turn_id)
            if last is not None:
                events[:] = [event for event in events if event.event_id > last.event_id]
        async with client.pipeline(transaction=False) as pipe:
            if not self._owner_written:
                pipe.set(self.owner_key, self.owner, ex=ttl)
            for event in events:
                payload = json.dumps(event.data, separators=(",", ":"), default=str)
                entry: dict[FieldT, EncodableT] = {"n": event.name, "d": payload}
                pipe.xadd(self.key, entry, id=f"{event.event_id}-0")
            if events:
                pipe.expire(self.key, ttl)
                pipe.expire(self.owner_key, ttl)
            await pipe.execute()
        self._owner_written = True

    async def _forget_if_erased(self) -> None:
        """The user was erased while the stream ran: its events must not outlive the purge."""
        redis = self.buffer.redis
        if await is_erased(redis, self.owner.partition(":")[2]):
            try:
                await redis.client.delete(self.key, self.owner_key)
            except Exception:
                logger.warning("could not remove an erased user's stream buffer", exc_info=True)

    def _fail(self) -> None:
        if not self.failed:
            logger.warning("stream buffer unavailable: this stream cannot be resumed")
        self.failed = True
