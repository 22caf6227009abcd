"""A retry with an Idempotency-Key whose first request holds the key: the first request's
answer (from the key's record, or from the turn's row when the answer never reached the key),
its live stream, or a 409 telling the client to retry.

No pooled connection is held while a retry waits: each database read is a short transaction.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from app.auth.principal import Principal
from app.config import Settings
from app.conversation.durability.guards import ChatGuards
from app.conversation.durability.idempotency import Claim, IdempotencyRecord
from app.conversation.repository import TurnRepository
from app.conversation.streaming.resume import check_resumable
from app.conversation.streaming.sse import format_event
from app.conversation.turn.schemas import ChatResponse
from app.conversation.turn.stored import stored_response
from app.core.errors import Conflict, NotFound
from app.core.json_types import JsonObject
from app.core.unit_of_work import Transactions
from app.observability import metrics


def first_request_failed() -> Conflict:
    """The first request with the key failed, died or lapsed: the client may retry (which
    runs the request, once)."""
    return Conflict(
        "The first request with this Idempotency-Key did not finish; retry.",
        code="idempotent_request_failed",
    )


async def stored_events(recorded: JsonObject) -> AsyncIterator[bytes]:
    """A stored `/chat` answer (as recorded under its key) as a stream: meta, the whole answer
    as one token, sources, done."""
    response = ChatResponse.model_validate(recorded)
    meta = {
        "session_id": str(response.session_id),
        "turn_id": str(response.turn_id),
        "query_composition": response.query_composition,
    }
    yield format_event(1, "meta", meta)
    yield format_event(2, "token", {"text": response.answer})
    yield format_event(3, "sources", {"sources": [s.model_dump() for s in response.sources]})
    yield format_event(4, "done", response.done_event().data())


async def stored_rest(response: ChatResponse, after: int) -> AsyncIterator[bytes]:
    """The rest of a stream whose buffer is gone (expired, or evicted by a Redis under memory
    pressure) told from its stored turn: the stored events after `after`, and always its
    `done`, numbered past `after`, which carries the whole answer (the client's partial
    tokens are superseded by it)."""
    events = stored_events(response.model_dump(mode="json"))
    last = 0
    async for chunk in events:
        last += 1
        if last > after and last < 4:
            yield chunk
    yield format_event(max(4, after + 1), "done", response.done_event().data())


class RetryReplay:
    """What a retry that lost the claim gets (see the module docstring)."""

    def __init__(self, settings: Settings, guards: ChatGuards, transactions: Transactions) -> None:
        self.settings = settings
        self.guards = guards
        self.transactions = transactions

    async def answer(self, principal: Principal, claim: Claim) -> ChatResponse:
        """A retry of a `/chat` request: the first one's answer, once it has one. If the first
        request's process died, its turn is finished here once its lease has expired (and its
        record then holds the partial answer); a turn stored whose answer never reached the
        key (its process died, or Redis failed, just after the commit) is answered from its
        row."""
        settings = self.settings
        deadline = time.monotonic() + settings.llm_timeout_seconds + 30
        record = claim.record
        store = self.guards.idempotency
        leases = self.guards.leases
        assert leases is not None, "built in lifespan"
        while record["state"] != "done":
            left = deadline - time.monotonic()
            wait = max(0.0, min(left, settings.turn_lease_renew_seconds))
            waited = await store.wait_finished(claim, wait)
            if waited.record is not None:
                record = waited.record
                break
            if waited.state != "running" or left <= 0:  # released, Redis down, or too long
                raise first_request_failed()
            if await leases.settle(principal.tenant_id, claim.turn_id):  # no producer left
                found = await store.wait_finished(claim, 0)
                stored = found.record or await self._recorded_from_row(principal, claim)
                if stored is not None:
                    record = stored
        metrics.IDEMPOTENT_REPLAYS.labels(endpoint="/chat").inc()
        return ChatResponse.model_validate(record["response"])

    async def join(self, principal: Principal, claim: Claim) -> AsyncIterator[bytes] | None:
        """A retried stream: None when the first request's buffer is there to follow; else
        the stored answer as a stream (the buffer has expired). While the first request is
        still being admitted there is no buffer yet: it is waited for as long as a claim may
        wait for its turn to be recorded; a first request that failed or died before is a 409
        (retry), as for `/chat`."""
        store = self.guards.idempotency
        deadline = time.monotonic() + store.admission_ttl
        record: IdempotencyRecord | None = claim.record
        first_miss = True
        while True:
            try:
                await check_resumable(self.guards.streams, principal, claim.turn_id)
                return None
            except NotFound:
                if record is not None and record["state"] == "done":
                    return stored_events(record["response"])
                if first_miss:  # the turn may be stored already, its buffer gone
                    first_miss = False
                    stored = await self._recorded_from_row(principal, claim)
                    if stored is not None:
                        return stored_events(stored["response"])
                waited = await store.wait_finished(claim, 0)  # one read of the key
                record = waited.record
                if waited.state in ("released", "unavailable") or time.monotonic() > deadline:
                    raise first_request_failed() from None
                if record is None:
                    await asyncio.sleep(0.05)  # claimed, not yet started

    async def _recorded_from_row(
        self, principal: Principal, claim: Claim
    ) -> IdempotencyRecord | None:
        """The finished record of the claim's turn built from its row, and written under the
        key (a retry after this one reads it there); None while the turn is not finished."""
        tenant_id = principal.tenant_id
        async with self.transactions(tenant_id) as db:
            turn = await TurnRepository(db, tenant_id).get(claim.turn_id)
        if turn is None or turn.status == "pending":
            return None
        response = stored_response(turn).model_dump(mode="json")
        if turn.idempotency_key is not None:
            await self.guards.idempotency.record_orphan_answer(
                turn.idempotency_key, turn.user_id, turn.id, response
            )
        return IdempotencyRecord(
            fingerprint=claim.record["fingerprint"],
            turn_id=claim.record["turn_id"],
            state="done",
            response=response,
        )
