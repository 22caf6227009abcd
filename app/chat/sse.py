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


class RunHandle:
    """A turn running in its own task, its events read through a queue.

    The run lives outside the request's (anyio) cancel scope: when the client goes away it
    is cancelled exactly once and cleans up as a plain asyncio task would — cancelling the
    graph's node tasks, and with them the model call — instead of being re-cancelled while
    LangGraph unwinds. Its context is copied, so the request id still reaches logs.
    """

    def __init__(self, events: AsyncIterator[TurnEvent]) -> None:
        self.queue: asyncio.Queue[TurnEvent | None] = asyncio.Queue()
        self.task = asyncio.create_task(self._produce(events), context=contextvars.copy_context())
        _RUNNING.add(self.task)
        self.task.add_done_callback(_RUNNING.discard)

    async def _produce(self, events: AsyncIterator[TurnEvent]) -> None:
        try:
            async for event in events:
                await self.queue.put(event)
        finally:
            self.queue.put_nowait(None)

    async def next(self, wait_seconds: float | None = None) -> TurnEvent | None:
        """The next event; None at the end. TimeoutError after `wait_seconds` of silence."""
        return await asyncio.wait_for(self.queue.get(), wait_seconds)

    def cancel(self) -> None:
        if not self.task.done():
            self.task.cancel()  # it finishes on its own (the turn is marked incomplete)


async def event_stream(
    events: AsyncIterator[TurnEvent], heartbeat_seconds: float
) -> AsyncIterator[bytes]:
    """Encode `events`; emit a heartbeat comment after each silent interval; cancel the run
    when the response is cancelled (the client went away)."""
    run = RunHandle(events)
    sequence = 0
    try:
        while True:
            try:
                event = await run.next(heartbeat_seconds)
            except TimeoutError:
                yield HEARTBEAT
                continue
            if event is None:
                break
            sequence += 1
            yield format_event(sequence, event.name, event.data)
    finally:
        run.cancel()
