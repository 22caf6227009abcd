"""A new stream's events as its client reads them: from the run's queue, and, once the client
falls behind, from the run's Redis buffer at the client's own pace (ADR 0083).

The queue of a run holds at most `backlog` events (`run.py`). Before that bound, a slow
client kept the rest of the answer in the process, 440 bytes per token event, once the
kernel's and the transport's buffers were full. A client that falls behind goes on from the
buffer after the last event
it was sent, through the process's one buffer reader (`tail.py`), page by page: the client
sees one stream, every event once, in order. A run without a buffer (Redis gave up on it)
cannot be followed so: its slow client's stream ends with `error` `stream_too_slow` (no id),
and the run is let finish and stores its answer for the session.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator

from app.conversation.streaming.buffer import TERMINAL_EVENTS
from app.conversation.streaming.run import FellBehind, RunHandle
from app.conversation.streaming.sse import HEARTBEAT, error_event, format_event, retry_hint

logger = logging.getLogger(__name__)

TOO_SLOW_EVENT = error_event(
    "stream_too_slow",
    "This connection reads the answer more slowly than it is written, and it cannot be "
    "followed from the server's buffer right now. The answer is being stored: read it from "
    "the session, or resume the stream.",
)
"""No `id:`: the client's Last-Event-ID stays that of the last event it got."""
BUFFER_UNAVAILABLE_EVENT = error_event(
    "resume_unavailable", "The stream cannot be followed right now; resume it again shortly."
)


async def event_stream(
    run: RunHandle, heartbeat_seconds: float, grace_seconds: float, retry_ms: int
) -> AsyncIterator[bytes]:
    """Encode the run's events; emit a heartbeat comment after each silent interval; when
    the client falls behind, go on from the run's buffer; when the response is cancelled
    (the client went away), detach from the run."""
    sent = 0
    try:
        yield retry_hint(retry_ms)
        while True:
            try:
                item = await run.next(heartbeat_seconds)
            except TimeoutError:
                yield HEARTBEAT
                continue
            except FellBehind:
                async for chunk in _from_buffer(run, sent, heartbeat_seconds):
                    yield chunk
                break
            if item is None:
                break
            sent, event = item
            yield format_event(sent, event.name, event.data)
    finally:
        run.detach(grace_seconds)


async def _from_buffer(
    run: RunHandle, after: int, heartbeat_seconds: float
) -> AsyncIterator[bytes]:
    """The run's events after `after`, read from its buffer at the client's pace, to the
    terminal one; an `error` without an id when the buffer cannot be read."""
    writer = run.writer
    if run.follow is None or writer is None or writer.failed:
        run.let_finish = True  # nobody can be sent the rest: it is stored for the session
        yield TOO_SLOW_EVENT
        return
    last_output = time.monotonic()
    try:
        async for event in run.follow(run.turn.turn_id, after):
            now = time.monotonic()
            if event is not None:
                last_output = now
                yield format_event(event.event_id, event.name, event.data)
                if event.name in TERMINAL_EVENTS:
                    return
                continue
            # A silence: the rest may never reach the buffer (given up, or the run ended
            # without a terminal event once everything was written).
            if writer.failed or (run.task.done() and writer.task.done()):
                yield BUFFER_UNAVAILABLE_EVENT
                return
            if now - last_output >= heartbeat_seconds:
                last_output = now
                yield HEARTBEAT
    except Exception:  # Redis failing: the client resumes, from the last event it got
        logger.warning("a slow stream could not be followed from its buffer", exc_info=True)
        yield BUFFER_UNAVAILABLE_EVENT
