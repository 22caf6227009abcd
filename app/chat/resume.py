"""`GET /chat/{turn_id}/stream`: the events after `Last-Event-ID`, then the live rest.

Everything comes from the turn's Redis buffer, never from this process's memory, so a client
may resume on any API process. While following, the client announces itself on the control
channel so the generating process does not stop the run for want of a listener.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator

from app.auth.principal import Principal
from app.chat.sse import HEARTBEAT, format_event, retry_hint
from app.chat.stream_buffer import TERMINAL_EVENTS
from app.chat.streams import StreamHub
from app.core.errors import BadRequest, NotFound, ServiceUnavailable

ANNOUNCE_EVERY_SECONDS = 1.0


def parse_last_event_id(raw: str | None) -> int:
    if raw is None or raw.strip() == "":
        return 0
    try:
        value = int(raw.strip())
    except ValueError:
        raise BadRequest("Last-Event-ID must be an event id (an integer).") from None
    if value < 0:
        raise BadRequest("Last-Event-ID must not be negative.")
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
) -> AsyncIterator[bytes]:
    yield retry_hint(retry_ms)
    last_id = after
    now = time.monotonic()
    last_output = last_event = now
    last_announce = 0.0
    async for event in hub.buffer.follow(turn_id, after):
        now = time.monotonic()
        if now - last_announce >= ANNOUNCE_EVERY_SECONDS:
            await hub.announce_attached(turn_id)
            last_announce = now
        if event is None:
            if now - last_event >= silence_limit_seconds:  # its process died mid-answer
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
