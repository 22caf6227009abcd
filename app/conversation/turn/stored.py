"""A finished turn's outcome read back from its row: what a client is told when the row, not
the run, has the last word (a retry whose first request died, a run whose turn another process
finished, a stop that lands after the final write committed)."""

from __future__ import annotations

from app.conversation.turn.events import DoneEvent, DoneExtras
from app.conversation.turn.manifest import Manifest
from app.conversation.turn.schemas import ChatResponse, public_source
from app.models import QueryHistory


def stored_response(turn: QueryHistory) -> ChatResponse:
    """The `/chat` answer of a finished turn, from its row alone: for a retry whose first
    request's process stored the turn but died (or lost Redis) before recording the answer
    under the key. Its sources are the manifest's (with their previews since they are
    recorded there; a turn stored before that shows them without)."""
    manifest = Manifest.read(turn.context_metadata, turn.manifest_version)
    cited = set(manifest.citations.cited if manifest.citations else [])
    sources = [
        public_source(
            {"n": n, "source_id": "", "title": "", "snippet": "", **entry.model_dump()}, cited
        )
        for n, entry in enumerate(manifest.sources or [], start=1)
    ]
    cached = manifest.prompt_cache.cached_prompt_tokens if manifest.prompt_cache else 0
    done = DoneEvent(
        turn_id=turn.id,
        session_id=turn.session_id,
        status=turn.status,
        answer=turn.answer,
        query_composition=turn.query_composition,
        usage={
            "prompt_tokens": turn.prompt_tokens,
            "completion_tokens": turn.completion_tokens,
            "cached_prompt_tokens": cached,
        },
        context_metadata=manifest,
        extras=DoneExtras(
            model=turn.model or "",
            latency_ms=turn.latency_ms,
            stopped=turn.status == "incomplete",
        ),
    )
    return ChatResponse.of(done, sources)
