"""A retry with an Idempotency-Key whose first request holds the key: the first request's
answer (from the key's record, or from the turn's row when the answer never reached the key),
its live stream, or a 409 telling the client to retry.

No pooled connection is held while a retry waits: each database read is a short transaction.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from app.access.repository import visible_collection_ids
from app.access.withhold import cited_documents, withhold_answer
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


Shown = Callable[[JsonObject], Awaitable[JsonObject]]
"""A stored answer (or a replayed event's data) as its caller may see it now."""

_WITHHELD_EVENTS = (b"event: sources\n", b"event: done\n")


async def withheld_events(events: AsyncIterator[bytes], shown: Shown) -> AsyncIterator[bytes]:
    """A followed stream with its `sources` and `done` events passed through `shown`: a
    retry that joins the first request's buffer replays what the caller may still see
    (ADR 0087). Other events, heartbeats and comments pass as they are. `events` is closed
    with this stream (a client gone frees its follow place at once, not when collected)."""
    try:
        async for chunk in events:
            if not any(name in chunk for name in _WITHHELD_EVENTS):
                yield chunk
                continue
            blocks = []
            for block in chunk.split(b"\n\n"):
                blocks.append(await _withheld_block(block, shown) if block else block)
            yield b"\n\n".join(blocks)
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()


async def _withheld_block(block: bytes, shown: Shown) -> bytes:
    lines = block.split(b"\n")
    if not any(line in (b"event: sources", b"event: done") for line in lines):
        return block
    for i, line in enumerate(lines):
        if line.startswith(b"data: "):
            data = json.loads(line[6:])
            after = await shown(data)
            if after is not data:
                lines[i] = b"data: " + json.dumps(after, separators=(",", ":")).encode()
    return b"\n".join(lines)


class RetryReplay:
    """What a retry that lost the claim gets (see the module docstring)."""

    def __init__(self, settings: Settings, guards: ChatGuards, transactions: Transactions) -> None:
        self.settings = settings
        self.guards = guards
        self.transactions = transactions

    async def shown(
        self, principal: Principal, visible: Sequence[uuid.UUID] | None, answer: JsonObject
    ) -> JsonObject:
        """A stored answer (a `/chat` response, a stream's `sources` or `done`) with the
        sources of documents the caller may no longer see withheld, as the turns listing
        withholds them (ADR 0078, 0087). `visible`: what the request's authentication read;
        None: read here. No transaction for an answer citing no knowledge-base document."""
        if not cited_documents([answer, answer.get("context_metadata")]):
            return answer
        tenant_id = principal.tenant_id
        # Not narrowed: the withholding reads which collection each cited document is in,
        # whoever may see it (ids only), and needs no narrowing lifted for it.
        async with self.transactions(tenant_id) as db:
            if visible is None:
                visible = await visible_collection_ids(
                    db, tenant_id, principal.user_id, is_admin=principal.is_admin
                )
            withheld = await withhold_answer(db, tenant_id, answer, visible)
        return answer if withheld is answer else dict(withheld)

    async def answer(
        self,
        principal: Principal,
        claim: Claim,
        visible: Sequence[uuid.UUID] | None = None,
    ) -> ChatResponse:
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
        return ChatResponse.model_validate(await self.shown(principal, visible, record["response"]))

    async def join(
        self,
        principal: Principal,
        claim: Claim,
        visible: Sequence[uuid.UUID] | None = None,
    ) -> AsyncIterator[bytes] | None:
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
                    return stored_events(await self.shown(principal, visible, record["response"]))
                if first_miss:  # the turn may be stored already, its buffer gone
                    first_miss = False
                    stored = await self._recorded_from_row(principal, claim)
                    if stored is not None:
                        response = stored["response"]
                        return stored_events(await self.shown(principal, visible, response))
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
