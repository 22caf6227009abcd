"""The chat endpoints: `/chat`, `/chat/stream`, resume and stop, each translating HTTP to
the turn's lifecycle (admission, the run, idempotent replay, orphans).

Over 300 lines: the idempotent replay of a `/chat` answer or a stream belongs next to the
endpoints it replays; issue 14 moves the streaming parts to a `chat/streaming` package.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Header, Response
from fastapi.responses import StreamingResponse
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.principal import CurrentPrincipal, Principal
from app.chat.events import DoneEvent
from app.chat.idempotency import MAX_KEY_CHARS, Claim, fingerprint
from app.chat.leases import TurnLeases
from app.chat.repository import TurnRepository
from app.chat.runner import PreparedTurn
from app.chat.schemas import ChatRequest, ChatResponse, StopResponse, chat_answer
from app.chat.service import prepare_turn
from app.chat.streaming.resume import Settle, check_resumable, parse_last_event_id, resumed_stream
from app.chat.streaming.run import Finisher, event_stream
from app.chat.streaming.sse import SSE_HEADERS, format_event
from app.core.deps import DbSession, ResourcesDep
from app.core.errors import AppError, Conflict, NotFound, ServiceUnavailable, error_responses
from app.core.resources import Resources
from app.observability import metrics

router = APIRouter(tags=["chat"])

_STREAM_DOC: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Server-Sent Events: meta, token…, sources, done — or error.",
        "content": {
            "text/event-stream": {
                "schema": {  # each event (ADR 0006); `data` is a JSON object
                    "type": "object",
                    "required": ["event", "data"],
                    "properties": {
                        "id": {"type": "string"},
                        "event": {"type": "string"},
                        "data": {"type": "string", "contentMediaType": "application/json"},
                        "retry": {"type": "integer"},
                    },
                }
            }
        },
    }
}
# A turn: its session or attachments unknown (404), a retry of a request that failed (409),
# a rate limit or quota (429).
_TURN_ERRORS = error_responses(404, 409, 429)
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        description="Retries with this key never run twice.",
        # Checked by the idempotency store (422 `invalid_idempotency_key`).
        json_schema_extra={"maxLength": MAX_KEY_CHARS, "pattern": r"\S"},
    ),
]
_JOIN_ATTEMPTS = 100
# An event id; empty: from the start. Checked by `parse_last_event_id` (400).
LastEventId = Annotated[
    str, Header(alias="Last-Event-ID", json_schema_extra={"pattern": r"^\s*[0-9]{0,18}\s*$"})
]


async def _claim(
    resources: Resources, session: AsyncSession, principal: Principal, key: str | None,
    endpoint: str, body: ChatRequest, turn_id: uuid.UUID,
) -> Claim | None:  # fmt: skip
    """Claimed before anything is written: a retry that loses the claim leaves no row."""
    if key is None:
        return None

    async def turn_exists(claimed: uuid.UUID) -> bool:
        # A stored answer is replayed only while its turn exists (not after the session's
        # deletion or the user's erasure).
        return await TurnRepository(session, principal.tenant_id).get(claimed) is not None

    store = resources.guards.idempotency
    return await store.claim(principal, key, fingerprint(endpoint, body), turn_id, turn_exists)


async def _admit(
    resources: Resources,
    session: AsyncSession,
    principal: Principal,
    body: ChatRequest,
    claim: Claim | None,
    turn_id: uuid.UUID,
) -> PreparedTurn:
    """Rate limits and quotas (before the model is called), then the turn is recorded in the
    request's transaction; a refused turn (or any failure here) releases its idempotency
    claim."""
    limiter = resources.guards.limiter
    try:
        limits = await limiter.limits_for(session, principal.tenant_id)
        await limiter.admit(principal.tenant_id, principal.user_id, limits)
        # The claim's key and fingerprint go with the turn: whoever finishes it if its process
        # dies stores the answer under the key (app/chat/orphans.py).
        idem = None if claim is None else f"{claim.key}\n{claim.record['fingerprint']}"
        return await prepare_turn(
            session, principal, body, resources.settings, turn_id, idempotency_key=idem
        )
    except BaseException:
        if claim is not None:
            await resources.guards.idempotency.release(claim)
        raise


def _finishers(resources: Resources, claim: Claim | None) -> tuple[Finisher, ...]:
    guards = resources.guards
    if claim is None:
        return (guards.account,)
    return (guards.account, guards.idempotency.finisher(claim))


@router.post("/chat", response_model=ChatResponse, responses=_TURN_ERRORS)
async def chat(
    body: ChatRequest,
    principal: CurrentPrincipal,
    session: DbSession,
    resources: ResourcesDep,
    idempotency_key: IdempotencyKey = None,
) -> ChatResponse:
    """One turn, answered as JSON once complete."""
    turn_id = uuid.uuid4()
    claim = await _claim(resources, session, principal, idempotency_key, "/chat", body, turn_id)
    if claim is not None and not claim.won:
        # A retry may wait a whole model call for the first answer: not holding a pooled
        # connection meanwhile, or a burst of retries starves the pool.
        await session.commit()
        return await _stored_answer(resources, principal, claim)
    turn = await _admit(resources, session, principal, body, claim, turn_id)
    await session.commit()  # release the connection: the pipeline uses its own transactions
    run = resources.guards.streams.start(
        turn, resources.runner.run(turn, stream_tokens=False), buffered=False,
        finishers=_finishers(resources, claim),
    )  # fmt: skip
    done: dict[str, Any] | None = None
    sources: list[dict[str, Any]] = []
    try:
        while done is None and (item := await run.next()) is not None:
            _, event = item
            if event.name == "error":
                raise AppError.of(event.status_code, event.data["code"], event.data["message"])
            if event.name == "sources":
                sources = event.data["sources"]
            if event.name == "done":
                done = event.data
    finally:
        if not run.finished:
            run.cancel()  # the client went away
    if done is None:
        raise AppError("The turn ended without an answer.")
    # The quota and the idempotency record are written before the answer leaves, so the
    # client's next request sees them; the graph's checkpoint write goes on meanwhile, as it
    # does after a stream's `done`.
    await asyncio.shield(run.settled())
    return ChatResponse.model_validate(chat_answer(turn.session_id, turn.turn_id, done, sources))


async def _stored_answer(resources: Resources, principal: Principal, claim: Claim) -> ChatResponse:
    """A retry of a `/chat` request: the first one's answer, once it has one. If the first
    request's process died, its turn is finished here once its lease has expired (and its
    record then holds the partial answer)."""
    settings = resources.settings
    deadline = time.monotonic() + settings.llm_timeout_seconds + 30
    record = claim.record
    store = resources.guards.idempotency
    while record["state"] != "done":
        left = deadline - time.monotonic()
        wait = min(left, settings.turn_lease_renew_seconds)
        started = time.monotonic()
        found = await store.wait_finished(claim, wait)
        if found is not None:
            record = found
            break
        if left <= 0 or time.monotonic() - started < wait:  # timed out, or released
            raise Conflict(
                "The first request with this Idempotency-Key did not finish; retry.",
                code="idempotent_request_failed",
            )
        await _leases(resources).settle(principal.tenant_id, claim.turn_id)
    metrics.IDEMPOTENT_REPLAYS.labels(endpoint="/chat").inc()
    return ChatResponse.model_validate(record["response"])


def _leases(resources: Resources) -> TurnLeases:
    leases = resources.guards.streams.leases
    assert leases is not None, "built in lifespan"
    return leases


@router.post(
    "/chat/stream",
    response_class=StreamingResponse,
    responses={**_STREAM_DOC, **_TURN_ERRORS},
)
async def chat_stream(
    body: ChatRequest,
    principal: CurrentPrincipal,
    session: DbSession,
    resources: ResourcesDep,
    idempotency_key: IdempotencyKey = None,
) -> StreamingResponse:
    """One turn, streamed as Server-Sent Events. The session is checked before the stream
    starts (404 as JSON); failures after that arrive as an `error` event. The turn id is in
    the `meta` event and the `X-Turn-Id` header, for resume and stop."""
    turn_id = uuid.uuid4()
    claim = await _claim(
        resources, session, principal, idempotency_key, "/chat/stream", body, turn_id
    )
    settings = resources.settings
    if claim is not None and not claim.won:
        metrics.IDEMPOTENT_REPLAYS.labels(endpoint="/chat/stream").inc()
        replay = await _joined_stream(resources, principal, claim)
        headers = {**SSE_HEADERS, "X-Turn-Id": str(claim.turn_id)}
        return StreamingResponse(replay, media_type="text/event-stream", headers=headers)
    turn = await _admit(resources, session, principal, body, claim, turn_id)
    await session.commit()
    run = resources.guards.streams.start(
        turn, resources.runner.run(turn), buffered=True, finishers=_finishers(resources, claim)
    )
    metrics.STREAMS_STARTED.labels(kind="new").inc()
    stream = event_stream(
        run, settings.sse_heartbeat_seconds, settings.sse_resume_grace_seconds,
        settings.sse_retry_ms,
    )  # fmt: skip
    headers = {**SSE_HEADERS, "X-Turn-Id": str(turn.turn_id)}
    return StreamingResponse(_counted(stream), media_type="text/event-stream", headers=headers)


async def _counted(stream: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    metrics.STREAMS_ACTIVE.inc()
    try:
        async for chunk in stream:
            yield chunk
    finally:
        metrics.STREAMS_ACTIVE.dec()


async def _joined_stream(
    resources: Resources, principal: Principal, claim: Claim
) -> AsyncIterator[bytes]:
    """A retried stream: the first request's events from its buffer (all of them, then the
    live rest); when the buffer has expired, the stored answer as one token."""
    hub, settings = resources.guards.streams, resources.settings
    for attempt in range(_JOIN_ATTEMPTS):
        try:
            await check_resumable(hub, principal, claim.turn_id)
            break
        except NotFound:
            if claim.record["state"] == "done":
                return _stored_events(claim.record["response"])
            if attempt == _JOIN_ATTEMPTS - 1:
                raise
            await asyncio.sleep(0.05)  # the first request has claimed but not yet started
    return _counted(
        resumed_stream(
            hub, claim.turn_id, 0, heartbeat_seconds=settings.sse_heartbeat_seconds,
            silence_limit_seconds=settings.llm_timeout_seconds + 30,
            retry_ms=settings.sse_retry_ms,
            settle=_settler(resources, principal, claim.turn_id),
            settle_every_seconds=settings.turn_lease_renew_seconds,
        )
    )  # fmt: skip


def _settler(resources: Resources, principal: Principal, turn_id: uuid.UUID) -> Settle:
    leases = _leases(resources)

    async def settle() -> bool:
        return await leases.settle(principal.tenant_id, turn_id)

    return settle


async def _stored_events(response: dict[str, Any]) -> AsyncIterator[bytes]:
    meta = {k: response[k] for k in ("session_id", "turn_id", "query_composition")}
    yield format_event(1, "meta", meta)
    yield format_event(2, "token", {"text": response["answer"]})
    yield format_event(3, "sources", {"sources": response["sources"]})
    yield format_event(4, "done", DoneEvent.replayed(response).data())


@router.get(
    "/chat/{turn_id}/stream",
    response_class=StreamingResponse,
    responses={**_STREAM_DOC, **error_responses(400)},
)
async def resume_stream(
    turn_id: uuid.UUID,
    principal: CurrentPrincipal,
    resources: ResourcesDep,
    last_event_id: LastEventId = "",
) -> StreamingResponse:
    """Resume an interrupted stream: the events after `Last-Event-ID` (all without it), then
    the live rest. Works on any API process while the stream's buffer lasts."""
    after = parse_last_event_id(last_event_id)
    hub, settings = resources.guards.streams, resources.settings
    await check_resumable(hub, principal, turn_id)
    metrics.STREAMS_STARTED.labels(kind="resumed").inc()
    stream = resumed_stream(
        hub, turn_id, after, heartbeat_seconds=settings.sse_heartbeat_seconds,
        silence_limit_seconds=settings.llm_timeout_seconds + 30, retry_ms=settings.sse_retry_ms,
        settle=_settler(resources, principal, turn_id),
        settle_every_seconds=settings.turn_lease_renew_seconds,
    )  # fmt: skip
    return StreamingResponse(_counted(stream), media_type="text/event-stream", headers=SSE_HEADERS)


@router.post(
    "/chat/{turn_id}/stop",
    status_code=202,
    response_model=StopResponse,
    responses={
        200: {"model": StopResponse, "description": "Stored `incomplete` here"},
        **error_responses(409),
    },
)
async def stop_turn(
    turn_id: uuid.UUID,
    principal: CurrentPrincipal,
    session: DbSession,
    resources: ResourcesDep,
    response: Response,
) -> StopResponse:
    """Stop a running turn (on whichever process runs it): the model call is cancelled, the
    stream ends with `done` marked `stopped`, the turn is stored `incomplete` (202). When the
    process running it is gone (its lease expired, or its channel has no listener), the turn
    is finished here, with the partial answer its stream buffer holds (200, `stopped`)."""
    turn = await TurnRepository(session, principal.tenant_id).get(turn_id)
    if turn is None or turn.user_id != principal.user_id:
        raise NotFound("Turn not found.")
    if turn.status != "pending":
        raise Conflict("The turn is not running.", code="turn_not_running")
    owner = turn.lease_owner
    await session.commit()  # the turn may be finished below, in its own transaction
    hub = resources.guards.streams
    finisher = _leases(resources).finisher
    # Not running here, and its owner stopped renewing the lease: nobody runs the turn.
    if turn_id not in hub.runs and await finisher.finish(
        principal.tenant_id, turn_id, reason="run_lost"
    ):
        response.status_code = 200
        return StopResponse(turn_id=turn_id, status="stopped")
    try:
        reached = await hub.stop(turn_id, owner)
    except Exception:
        raise ServiceUnavailable(
            "The stop could not reach the process running this turn.", code="stop_unavailable"
        ) from None
    if reached:
        return StopResponse(turn_id=turn_id, status="stopping")
    # Its owner does not listen (it died): finish the turn now, whatever its lease says.
    await finisher.finish(principal.tenant_id, turn_id, force=True, reason="run_lost")
    response.status_code = 200
    return StopResponse(turn_id=turn_id, status="stopped")
