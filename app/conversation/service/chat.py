"""A chat turn's lifecycle behind the endpoints: the idempotency claim, admission, the run,
the replay of a retried request (app/conversation/durability/replay.py), resume and stop.

The service owns its transactions, through the `Transactions` it is handed (ADR 0070): each
step that reads or writes the database (the claim's check that a replayed turn still exists,
admission, the stop's look-up) runs in a short transaction, committed when the step ends —
for `/chat` and `/chat/stream`, the request's transaction authentication began (`begun`),
which admission commits. No pooled connection is held while a turn runs or while a retry
waits for the first request's answer: the pipeline uses its own transactions too.

Over 300 lines because the four entry points share one lifecycle — the claim, the recall of
a forgotten key, admission in the transaction authentication began, the run's finishers —
and splitting them would scatter it.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from functools import partial

from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.principal import Principal
from app.config import Settings
from app.conversation.durability.guards import ChatGuards
from app.conversation.durability.idempotency import Claim, IdempotencyStore, fingerprint
from app.conversation.durability.leases import TurnLeases
from app.conversation.durability.replay import RetryReplay, stored_rest, withheld_events
from app.conversation.pipeline.runner import PreparedTurn, TurnRunner
from app.conversation.repository import TurnRepository
from app.conversation.service import admission
from app.conversation.service.admission import Opening
from app.conversation.streaming.local import event_stream
from app.conversation.streaming.resume import Settle, check_resumable, resumed_stream
from app.conversation.streaming.run import Finisher
from app.conversation.turn.events import DoneEvent
from app.conversation.turn.schemas import ChatRequest, ChatResponse, StopResponse
from app.conversation.turn.stored import stored_response
from app.conversation.turn.types import PublicSource
from app.core.db import visible_collections
from app.core.errors import AppError, Conflict, NotFound, ServiceUnavailable
from app.core.unit_of_work import Transactions, release
from app.embeddings.base import Embedder, prefetch
from app.limits.limiter import Reservation
from app.observability import metrics

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class StartedStream:
    """A stream to send: its turn (for the `X-Turn-Id` header) and its encoded events."""

    turn_id: uuid.UUID
    events: AsyncIterator[bytes]


class ChatService:
    """The chat endpoints' one entry point each: `answer`, `stream`, `resume`, `stop`."""

    def __init__(
        self,
        settings: Settings,
        guards: ChatGuards,
        runner: TurnRunner,
        transactions: Transactions,
        embedder: Embedder,
    ) -> None:
        """`transactions` is the service's own door to the database (ADR 0070): the runner
        runs turns, and is never reached into for a transaction."""
        self.settings = settings
        self.guards = guards
        self.runner = runner
        self.transactions = transactions
        self.embedder = embedder
        self.replay = RetryReplay(settings, guards, transactions)

    async def answer(
        self,
        principal: Principal,
        body: ChatRequest,
        key: str | None,
        *,
        opening: Opening = None,
        begun: AsyncSession | None = None,
    ) -> ChatResponse:
        """One turn, answered once complete (or the first answer, for a retry with `key`).
        `begun`: the request's transaction, which authentication began; admission continues
        and commits it (ADR 0070)."""
        turn_id = uuid.uuid4()
        claim = await self._claim(principal, key, "/chat", body, turn_id, begun)
        if claim is not None and not claim.won:
            # A retry may wait a whole model call for the first answer: it holds no pooled
            # connection meanwhile, or a burst of retries starves the pool. What the caller
            # may see, authentication read: the replay withholds the rest (ADR 0087).
            visible = _visible(begun)
            await release(begun)
            return await self.replay.answer(principal, claim, visible)
        turn = await self._admit(principal, body, claim, turn_id, opening, begun)
        run = self.guards.streams.start(
            turn,
            self.runner.run(turn, stream_tokens=False),
            buffered=False,
            finishers=self._finishers(claim),
        )
        done: DoneEvent | None = None
        sources: list[PublicSource] = []
        try:
            while done is None and (item := await run.next()) is not None:
                _, event = item
                if event.name == "error":
                    raise AppError.of(event.status_code, event.data["code"], event.data["message"])
                if event.name == "sources":
                    sources = event.data["sources"]
                if event.name == "done":
                    done = event.done
        finally:
            if not run.finished:
                run.cancel()  # the client went away
        if done is None:
            raise AppError("The turn ended without an answer.")
        # The quota and the idempotency record are written before the answer leaves, so the
        # client's next request sees them; the graph's checkpoint write goes on meanwhile, as
        # it does after a stream's `done`.
        await asyncio.shield(run.settled())
        return ChatResponse.of(done, sources)

    async def stream(
        self,
        principal: Principal,
        body: ChatRequest,
        key: str | None,
        *,
        opening: Opening = None,
        begun: AsyncSession | None = None,
    ) -> StartedStream:
        """One turn, as Server-Sent Events (or the first request's, for a retry with `key`).
        Admission errors raise here, before the stream starts; later ones are `error` events.
        `begun` as for `answer`."""
        turn_id = uuid.uuid4()
        claim = await self._claim(principal, key, "/chat/stream", body, turn_id, begun)
        if claim is not None and not claim.won:
            visible = _visible(begun)
            await release(begun)
            metrics.IDEMPOTENT_REPLAYS.labels(endpoint="/chat/stream").inc()
            stored = await self.replay.join(principal, claim, visible)
            if stored is not None:
                return StartedStream(claim.turn_id, stored)
            await self.guards.follows.admit(principal.user_id, claim.turn_id)
            shown = partial(self.replay.shown, principal, visible)
            followed = withheld_events(self._follow(principal, claim.turn_id, 0), shown)
            return StartedStream(claim.turn_id, followed)
        turn = await self._admit(principal, body, claim, turn_id, opening, begun)
        run = self.guards.streams.start(
            turn, self.runner.run(turn), buffered=True, finishers=self._finishers(claim)
        )
        metrics.STREAMS_STARTED.labels(kind="new").inc()
        settings = self.settings
        events = event_stream(
            run,
            settings.sse_heartbeat_seconds,
            settings.sse_resume_grace_seconds,
            settings.sse_retry_ms,
        )
        return StartedStream(turn.turn_id, _counted(events))

    async def resume(
        self, principal: Principal, turn_id: uuid.UUID, after: int
    ) -> AsyncIterator[bytes]:
        """The caller's stream after event `after`, then its live rest; a finished turn whose
        buffer is gone, from its row (404 when the turn is not the caller's, or is running
        without a buffer). Its `sources` and `done` show what the caller may see now: a
        source of a collection they lost since is withheld, as in a retry (ADR 0087)."""
        shown = partial(self.replay.shown, principal, None)
        try:
            await check_resumable(self.guards.streams, principal, turn_id)
        except NotFound:
            stored = await self._stored_stream(principal, turn_id, after)
            if stored is None:
                raise
            metrics.STREAMS_STARTED.labels(kind="stored").inc()
            return withheld_events(stored, shown)
        if await self._events_evicted(turn_id):  # its owner key kept: a key of its own
            stored = await self._stored_stream(principal, turn_id, after)
            if stored is not None:
                metrics.STREAMS_STARTED.labels(kind="stored").inc()
                return withheld_events(stored, shown)
        await self.guards.follows.admit(principal.user_id, turn_id)
        metrics.STREAMS_STARTED.labels(kind="resumed").inc()
        return withheld_events(self._follow(principal, turn_id, after), shown)

    async def _events_evicted(self, turn_id: uuid.UUID) -> bool:
        """Whether the turn's buffer holds no event (evicted, or none written yet: a running
        turn's row tells which, and is followed live)."""
        try:
            return await self.guards.streams.buffer.last_event(turn_id) is None
        except Exception:  # Redis failing now: following it says so
            return False

    async def _stored_stream(
        self, principal: Principal, turn_id: uuid.UUID, after: int
    ) -> AsyncIterator[bytes] | None:
        """The caller's finished turn whose buffer is gone: its stored answer as the rest of
        the stream (issue 31: an evicting Redis made 56 of 60 resumes 404). None for a turn
        that is not the caller's or still running (its buffer is the only way to follow it)."""
        tenant_id = principal.tenant_id
        async with self.transactions(tenant_id) as db:
            turn = await TurnRepository(db, tenant_id).get(turn_id)
        if turn is None or turn.user_id != principal.user_id or turn.status == "pending":
            return None
        return stored_rest(stored_response(turn), after)

    async def stop(self, principal: Principal, turn_id: uuid.UUID) -> StopResponse:
        """Stop a running turn wherever it runs (`stopping`), or finish it here when the
        process running it is gone (`stopped`)."""
        async with self.transactions(principal.tenant_id) as db:
            turn = await TurnRepository(db, principal.tenant_id).get(turn_id)
        if turn is None or turn.user_id != principal.user_id:
            raise NotFound("Turn not found.")
        if turn.status != "pending":
            raise Conflict("The turn is not running.", code="turn_not_running")
        hub = self.guards.streams
        finisher = self._leases().finisher
        # Not running here, and its owner stopped renewing the lease: nobody runs the turn.
        if turn_id not in hub.runs and await finisher.finish(
            principal.tenant_id, turn_id, reason="run_lost"
        ):
            return StopResponse(turn_id=turn_id, status="stopped")
        try:
            reached = await hub.stop(turn_id, turn.lease_owner)
        except Exception:
            raise ServiceUnavailable(
                "The stop could not reach the process running this turn.", code="stop_unavailable"
            ) from None
        if reached:
            return StopResponse(turn_id=turn_id, status="stopping")
        # Its owner does not listen (it died): finish the turn now, whatever its lease says.
        await finisher.finish(principal.tenant_id, turn_id, force=True, reason="run_lost")
        return StopResponse(turn_id=turn_id, status="stopped")

    async def _claim(
        self,
        principal: Principal,
        key: str | None,
        endpoint: str,
        body: ChatRequest,
        turn_id: uuid.UUID,
        begun: AsyncSession | None = None,
    ) -> Claim | None:
        """Claimed before anything is written: a retry that loses the claim leaves no row."""
        if key is None:
            return None
        tenant_id = principal.tenant_id

        async def turn_exists(claimed: uuid.UUID) -> bool:
            # A stored answer is replayed only while its turn exists (not after the session's
            # deletion or the user's erasure).
            async with self.transactions.continuing(tenant_id, begun, end=False) as db:
                return await TurnRepository(db, tenant_id).get(claimed) is not None

        claim = await self.guards.idempotency.claim(
            tenant_id, principal.user_id, key, fingerprint(endpoint, body), turn_id, turn_exists
        )
        if claim is None or not claim.won:
            return claim
        return await self._recall(principal, claim, begun)

    async def _recall(
        self, principal: Principal, claim: Claim, begun: AsyncSession | None = None
    ) -> Claim:
        """A won claim is a new request unless the database holds a turn recorded under its
        key within the key's lifetime: Redis forgot the key (evicted it, lost it in a restart
        without persistence) and this is a retry of that turn (ADR 0069). A failed turn is not
        one: its key was released, and a retry runs again."""
        tenant_id = principal.tenant_id
        store = self.guards.idempotency
        try:
            async with self.transactions.continuing(tenant_id, begun, end=False) as db:
                turn = await TurnRepository(db, tenant_id).by_idempotency_key(
                    principal.user_id, claim.key, self.settings.idempotency_ttl_seconds
                )
        except BaseException:
            await store.release(claim)
            raise
        if turn is None or turn.idempotency_key is None:
            return claim
        metrics.IDEMPOTENCY_RECALLED.inc()
        logger.warning("Idempotency-Key found only in the database: Redis forgot it")
        response = None
        if turn.status != "pending":
            response = stored_response(turn).model_dump(mode="json")
        return await store.adopt(claim, turn.idempotency_key, turn.id, response)

    async def _admit(
        self,
        principal: Principal,
        body: ChatRequest,
        claim: Claim | None,
        turn_id: uuid.UUID,
        opening: Opening = None,
        begun: AsyncSession | None = None,
    ) -> PreparedTurn:
        """Rate limits and quotas (before the model is called), then the turn is recorded in
        the admission's own transaction (`begun`, the request's, when given), committed
        before the run starts; a refused turn (or any failure here) releases its
        idempotency claim."""
        limiter = self.guards.limiter
        tenant_id = principal.tenant_id
        reservation: Reservation | None = None
        try:
            async with self.transactions.continuing(tenant_id, begun) as db:
                limits = await limiter.limits_for(db, tenant_id)
                # The turn's expected tokens are held from here: given back below if it is
                # not admitted after all, settled to what it used when its run ends.
                reservation = await limiter.admit(tenant_id, principal.user_id, limits)
                # Admitted: embed the question while the turn is recorded (a refusal costs none).
                prefetch(self.embedder, [body.conversation()[-1]["content"]])
                if opening is not None:
                    await opening(db)
                # The claim's key and fingerprint go with the turn: whoever finishes it if its
                # process dies stores the answer under the key
                # (app/conversation/durability/orphans.py).
                reference = None if claim is None else IdempotencyStore.reference(claim)
                turn = await admission.prepare_turn(
                    db, principal, body, self.settings, turn_id, idempotency_key=reference
                )
                if claim is not None:  # last: a claim that lapsed meanwhile rolls this back
                    await self.guards.idempotency.confirm(claim)
            return replace(turn, reservation=reservation)
        except BaseException:
            await limiter.release(principal.user_id, reservation)
            if claim is not None:
                await self.guards.idempotency.release(claim)
            raise

    def _finishers(self, claim: Claim | None) -> tuple[Finisher, ...]:
        guards = self.guards
        if claim is None:
            return (guards.account,)
        return (guards.account, guards.idempotency.finisher(claim))

    def _follow(self, principal: Principal, turn_id: uuid.UUID, after: int) -> AsyncIterator[bytes]:
        """The turn's stream after `after`, counted, within the user's follow limits."""
        settings = self.settings
        events = resumed_stream(
            self.guards.streams,
            turn_id,
            after,
            heartbeat_seconds=settings.sse_heartbeat_seconds,
            silence_limit_seconds=settings.llm_timeout_seconds + 30,
            retry_ms=settings.sse_retry_ms,
            settle=self._settler(principal, turn_id),
            settle_every_seconds=settings.turn_lease_renew_seconds,
            stored=partial(self._stored_stream, principal, turn_id),
        )
        return _counted(self.guards.follows.bounded(principal.user_id, turn_id, events))

    def _settler(self, principal: Principal, turn_id: uuid.UUID) -> Settle:
        return partial(self._leases().settle, principal.tenant_id, turn_id)

    def _leases(self) -> TurnLeases:
        leases = self.guards.leases
        assert leases is not None, "built in lifespan"
        return leases


def _visible(begun: AsyncSession | None) -> list[uuid.UUID] | None:
    """The collections the request's authentication narrowed `begun` to (None: read them
    again where they are needed, as for `/v1`, which hands no transaction in)."""
    return None if begun is None else visible_collections(begun)


async def _counted(stream: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    metrics.STREAMS_ACTIVE.inc()
    try:
        async for chunk in stream:
            yield chunk
    finally:
        metrics.STREAMS_ACTIVE.dec()
