"""What a retry with an Idempotency-Key gets when it cannot follow the first request's run:
the stored answer as a stream, or a 409 telling it to retry."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from app.chat.events import DoneEvent
from app.chat.streaming.sse import format_event
from app.core.errors import Conflict


def first_request_failed() -> Conflict:
    """The first request with the key failed, died or lapsed: the client may retry (which
    runs the request, once)."""
    return Conflict(
        "The first request with this Idempotency-Key did not finish; retry.",
        code="idempotent_request_failed",
    )


async def stored_events(response: dict[str, Any]) -> AsyncIterator[bytes]:
    """A stored `/chat` answer as a stream: meta, the whole answer as one token, sources, done."""
    meta = {k: response[k] for k in ("session_id", "turn_id", "query_composition")}
    yield format_event(1, "meta", meta)
    yield format_event(2, "token", {"text": response["answer"]})
    yield format_event(3, "sources", {"sources": response["sources"]})
    yield format_event(4, "done", DoneEvent.replayed(response).data())
