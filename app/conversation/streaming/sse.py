"""Server-Sent Events encoding: numbered events, the heartbeat comment sent while the model is
silent, the `retry:` hint, and the response headers that keep proxies from buffering."""

from __future__ import annotations

import json
from typing import Any

HEARTBEAT = b": keep-alive\n\n"
SSE_HEADERS = {
    "Cache-Control": "no-cache, no-transform",
    "X-Accel-Buffering": "no",  # nginx: do not buffer the stream
    "Connection": "keep-alive",
}


def format_event(event_id: int, name: str, data: dict[str, Any]) -> bytes:
    """One event, as it goes on the wire (compact JSON `data`)."""
    payload = json.dumps(data, separators=(",", ":"), default=str)
    return f"id: {event_id}\nevent: {name}\ndata: {payload}\n\n".encode()


def retry_hint(milliseconds: int) -> bytes:
    """The `retry:` field: how long a disconnected client waits before resuming."""
    return f"retry: {milliseconds}\n\n".encode()


def error_event(code: str, message: str) -> bytes:
    """An `error` event without an `id:`: a client resuming from its Last-Event-ID misses
    nothing."""
    payload = json.dumps({"code": code, "message": message}, separators=(",", ":"))
    return f"event: error\ndata: {payload}\n\n".encode()
