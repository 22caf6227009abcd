"""Server-Sent Events: numbered events, heartbeat comments while the model is silent, and
cancellation of the producer when the client goes away."""

from __future__ import annotations

import asyncio
import contextvars
import json
from collections.abc import AsyncIterator
from typing import Any

from app.chat.runner import TurnEvent

HEARTBEAT = b": keep-alive\n\n"
# Runs whose client went away, finishing their cancellation (strong references: see asyncio).
_RUNNING: set[asyncio.Task[None]] = set()
SSE_HEADERS = {
    "Cache-Control": "no-cache, no-transform",
    "X-Accel-Buffering": "no",  # nginx: do not buffer the stream
    "Connection": "keep-alive",
}


def format_event(event_id: int, name: str, data: dict[str, Any]) -> bytes:
    payload = json.dumps(data, separators=(",", ":"), default=str)
    return f"id: {event_id}\nevent: {name}\ndata: {payload}\n\n".encode()


async def event_stream(
    events: AsyncIterator[TurnEvent], heartbeat_seconds: float
) -> AsyncIterator[bytes]:
    """Encode `events`; emit a heartbeat comment after each silent interval.

    The events are produced in their own task so a silent model does not block heartbeats; when
    the response is cancelled (client gone), that task is cancelled too, which cancels the run.
    """
    queue: asyncio.Queue[TurnEvent | None] = asyncio.Queue()

    async def produce() -> None:
        try:
            async for event in events:
                await queue.put(event)
        finally:
            queue.put_nowait(None)

    # The run lives in its own task, outside the request's (anyio) cancel scope: on disconnect
    # it is cancelled exactly once and cleans up as a plain asyncio task would — cancelling
    # the graph's node tasks, and with them the model call — instead of being re-cancelled
    # while LangGraph unwinds. Its context is copied, so the request id still reaches logs.
    producer = asyncio.create_task(produce(), context=contextvars.copy_context())
    _RUNNING.add(producer)
    producer.add_done_callback(_RUNNING.discard)
    sequence = 0
    try:
        while True:
            try:
                event = await asyncio.wait_for(queue.get(), heartbeat_seconds)
            except TimeoutError:
                yield HEARTBEAT
                continue
            if event is None:
                break
            sequence += 1
            yield format_event(sequence, event.name, event.data)
        await producer  # surfaces an unexpected producer error
    finally:
        if not producer.done():
            producer.cancel()  # it finishes on its own (the turn is marked incomplete)
