"""`GET /chat/{turn_id}/stream`: the events after `Last-Event-ID`, then the live rest.

Everything comes from the turn's Redis buffer, never from this process's memory, so a client
may resume on any API process. While following, the client announces itself on the control
channel so the generating process does not stop the run for want of a listener.

The stream always ends with a terminal event (docs/adr/0016):
- its producer's `done` or `error`;
- when the producer's process is gone (its turn's lease expired), the `done` (status
  `incomplete`, the partial answer) written by whoever finishes the orphaned turn, this
  process included: silence makes it check every `THREADLINE_TURN_LEASE_RENEW_SECONDS`;
- a `Last-Event-ID` at or past the terminal event gets that event again, at once;
- when this process shuts down, an `error` (`server_shutdown`) without an id: the client
  reconnects elsewhere with the same `Last-Event-ID`.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

from app.auth.principal import Principal
from app.conversation.streaming.buffer import TERMINAL_EVENTS
from app.conversation.streaming.hub import ANNOUNCE_EVERY_SECONDS, StreamHub
from app.conversation.streaming.sse import HEARTBEAT, format_event, retry_hint
from app.core.errors import BadRequest, NotFound, ServiceUnavailable

logger = logging.getLogger(__name__)

MAX_EVENT_ID = 2**53 - 1
"""Event ids are small counters; anything above this (2^53 - 1, the largest integer a
JavaScript client holds exactly) cannot name an event, and must not reach Redis, whose stream
ids stop at 2^64 - 1."""
# After the producer is known to be gone, how long to wait for its terminal event to appear
# in the buffer (it has just been written) before giving up on it.
_SETTLED_WAIT_SECONDS = 2.0
SHUTDOWN_EVENT = (
    "event: error\ndata: "
    + json.dumps(
        {"code": "server_shutdown", "message": "This server is shutting down; resume the stream."},
        separators=(",", ":"),
    )
    + "\n\n"
).encode()
"""No `id:`: the client's Last-Event-ID stays that of the last real event."""
UNAVAILABLE_EVENT = (
    "event: error\ndata: "
    + json.dumps(
        {
            "code": "resume_unavailable",
            "message": "The stream cannot be followed right now; resume it again shortly.",
        },
        separators=(",", ":"),
    )
    + "\n\n"
).encode()
"""No `id:` either: resuming again from the same Last-Event-ID misses nothing."""

Settle = Callable[[], Awaitable[bool]]
Stored = Callable[[int], Awaitable[AsyncIterator[bytes] | None]]
"""The rest of a stream after an event id, told from its stored turn (None: not stored)."""


def parse_last_event_id(raw: str | None) -> int:
    """The `Last-Event-ID` header as an event id (0: from the start); 400 when invalid."""
    if raw is None or raw.strip() == "":
        return 0
    try:
        value = int(raw.strip())
    except ValueError:
        raise BadRequest("Last-Event-ID must be an event id (an integer).") from None
    if value < 0:
        raise BadRequest("Last-Event-ID must not be negative.")
    if value > MAX_EVENT_ID:
        raise BadRequest(
            f"Last-Event-ID must be at most {MAX_EVENT_ID}.", code="last_event_id_out_of_range"
        )
    return value


async def check_resumable(hub: StreamHub, principal: Principal, turn_id: uuid.UUID) -> None:
    """404 unless the caller's stream is buffered (another user's stream is 404 too)."""
    try:
        owner = await hub.buffer.owner(turn_id)
    except Exception:
        raise ServiceUnavailable(
            "Streams cannot be resumed right now.", code="resume_unavailable"
        ) from None
    if owner != f"{principal.tenant_id}:{principal.user_id}":
        raise NotFound("No resumable stream for this turn.", code="stream_not_found")


async def resumed_stream(
    hub: StreamHub,
    turn_id: uuid.UUID,
    after: int,
    *,
    heartbeat_seconds: float,
    silence_limit_seconds: float,
    retry_ms: int,
    settle: Settle | None = None,
    settle_every_seconds: float = 5.0,
    stored: Stored | None = None,
) -> AsyncIterator[bytes]:
    """The events after `after`, then the live rest, always ending with a terminal event
    (see the module docstring). `settle` is asked, during silences, whether the producer is
    gone (and to finish its turn if so). `stored`: where the rest comes from when the
    buffer falls silent and the producer is gone, before the stream is called lost (a
    Redis under memory pressure evicted the events while this stream read them, issue 31)."""
    yield retry_hint(retry_ms)
    try:
        timing = (heartbeat_seconds, silence_limit_seconds, settle_every_seconds)
        async for chunk in _follow(hub, turn_id, after, timing, settle, stored):
            yield chunk
    except Exception:  # e.g. Redis gone for longer than its retries: say so, never just stop
        logger.warning("resumed stream interrupted", exc_info=True)
        yield UNAVAILABLE_EVENT


async def _follow(
    hub: StreamHub,
    turn_id: uuid.UUID,
    after: int,
    timing: tuple[float, float, float],
    settle: Settle | None,
    stored: Stored | None = None,
) -> AsyncIterator[bytes]:
    heartbeat_seconds, silence_limit_seconds, settle_every_seconds = timing
    ended = await _ended_at_or_before(hub, turn_id, after)
    if ended is not None:
        yield ended
        return
    last_id = after
    now = time.monotonic()
    last_output = last_event = last_settle = now
    last_announce = 0.0
    settled_at: float | None = None
    async for event in hub.tail.follow(turn_id, after):
        if hub.shutting_down.is_set():
            yield SHUTDOWN_EVENT
            return
        now = time.monotonic()
        if now - last_announce >= ANNOUNCE_EVERY_SECONDS:
            await hub.announce_attached(turn_id)
            last_announce = now
        if event is None:
            # Only a client that claimed to be past the end can miss the end: once an event
            # came, the terminal one comes the same way.
            ended = await _ended_at_or_before(hub, turn_id, last_id) if last_id == after else None
            if ended is not None:
                yield ended
                return
            if (
                settle is not None
                and settled_at is None
                and now - last_settle >= settle_every_seconds
            ):
                last_settle = now
                if await _settled(settle):
                    settled_at = now
            gone = settled_at is not None and now - settled_at >= _SETTLED_WAIT_SECONDS
            if gone or now - last_event >= silence_limit_seconds:
                rest = None if stored is None else await _stored_rest(stored, last_id)
                if rest is not None:
                    async for chunk in rest:
                        yield chunk
                    return
                yield format_event(
                    last_id + 1,
                    "error",
                    {"code": "stream_lost", "message": "The stream's producer went away."},
                )
                return
            if now - last_output >= heartbeat_seconds:
                last_output = now
                yield HEARTBEAT
            continue
        last_id = event.event_id
        last_output = last_event = now
        yield format_event(event.event_id, event.name, event.data)
        if event.name in TERMINAL_EVENTS:
            return


async def _stored_rest(stored: Stored, after: int) -> AsyncIterator[bytes] | None:
    try:
        return await stored(after)
    except Exception:  # PostgreSQL unreachable too: the stream is lost, as it says
        logger.warning("could not read the stream's stored turn", exc_info=True)
        return None


async def _settled(settle: Settle) -> bool:
    try:
        return await settle()
    except Exception:  # e.g. PostgreSQL unreachable: asked again after the next interval
        logger.warning("could not check whether the stream's producer is gone", exc_info=True)
        return False


async def _ended_at_or_before(hub: StreamHub, turn_id: uuid.UUID, position: int) -> bytes | None:
    """The stream's terminal event, encoded, if it has one at or before `position` (which a
    read after `position` would never see)."""
    if position <= 0:
        return None
    last = await hub.buffer.last_event(turn_id)
    if last is None or last.name not in TERMINAL_EVENTS or last.event_id > position:
        return None
    return format_event(last.event_id, last.name, last.data)
