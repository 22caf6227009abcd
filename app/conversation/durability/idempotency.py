"""`Idempotency-Key` on `/chat` and `/chat/stream`: one model call per key.

The first request claims the key with SET NX (atomic, so of ten concurrent retries exactly
one wins) and records its turn id; the winner stores the finished answer under the key. A
retry with the same body returns that answer, or follows the running turn (streams through
the Redis buffer, JSON by waiting for the stored answer). Another body with the same key is
a client bug: 422. A claim lives `ADMISSION_SECONDS` until its turn is recorded: a process that
dies in between (the turn never written, so nobody could ever finish it) blocks its key for
that long, not for a whole turn's lifetime. Once recorded (`confirm`, inside the admission's
transaction, which a lost claim rolls back), it outlives the longest turn (model timeout, the
end-of-turn write's outage retry, the turn lease: a turn whose process died is finished by
another, which records its answer under the key, see app/conversation/durability/orphans.py); a
stored answer lives
`THREADLINE_IDEMPOTENCY_TTL_SECONDS` (24 h). A run that fails, or a request that fails before
its run starts, releases its key, so a retry may try again. A finished record is replayed only
while its turn exists: after the session is deleted (or the user erased) the key starts afresh.

Never two turns for one key while Redis answers (docs/adr/0015): a claim that fails although
Redis answers is a 503 with `Retry-After`, and the finished record is written with retries.
Only a Redis that is down (no connection can be opened) lets the header be ignored.

Over 300 lines because a key's whole life (claim, confirm, wait, release, the orphan's
answer) is one protocol over the same keys and scripts: each step relies on the others'
compare-and-set rules, which are easier to check side by side.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict

from redis.exceptions import RedisError

from app.conversation.streaming.run import Finisher, RunOutcome
from app.conversation.turn.schemas import ChatRequest, ChatResponse
from app.core.errors import ServiceUnavailable, UnprocessableEntity
from app.core.json_types import JsonObject
from app.core.redis import RedisHandle
from app.pii.marks import is_erased

logger = logging.getLogger(__name__)

MAX_KEY_CHARS = 255
_POLL_SECONDS = 0.05
# Writes that must land while Redis answers (the finished record, a release) are retried for
# this long, with growing pauses: past a restart or a burst that exhausts the pool.
WRITE_DEADLINE_SECONDS = 30.0
_RETRY_BASE, _RETRY_CAP = 0.05, 1.0
# How long a claim lives before its turn is recorded: more than an admission may take (a
# database pool's 30 s checkout wait, the rate-limit and quota reads), far less than a turn.
ADMISSION_SECONDS = 60
# Gives a claim a running turn's lifetime, only while it still holds this request's claim.
_CONFIRM = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('EXPIRE', KEYS[1], ARGV[2]) end
return 0
"""
# Deletes the key only while it still holds this request's claim: a release that comes late
# must not remove a record someone else has written since.
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
# Store a finished orphan's answer under its key unless a newer request has claimed the key
# since (its record names another turn).
_RECORD_ANSWER = """
local current = redis.call('GET', KEYS[1])
if current and not string.find(current, ARGV[1], 1, true) then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
return 1
"""

# Puts the record of the turn a retry found in the database (ADR 0069) in place of this
# request's claim, only while the key still holds that claim.
_ADOPT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3]) and 1
end
return 0
"""

TurnExists = Callable[[uuid.UUID], Awaitable[bool]]


class IdempotencyUnavailable(ServiceUnavailable):
    """Redis answers, but the key could not be claimed: running without it could run the
    request twice, so the client retries shortly (with the same key)."""

    code = "idempotency_unavailable"
    message = "The Idempotency-Key could not be checked just now; retry shortly."

    def __init__(self) -> None:
        super().__init__(headers={"Retry-After": "1"})


class IdempotencyRecord(TypedDict):
    """What Redis holds under a key: the request's fingerprint, its turn, and, once `done`,
    the recorded `/chat` answer (a `ChatResponse`'s JSON)."""

    fingerprint: str
    turn_id: str
    state: Literal["running", "done"]
    response: NotRequired[JsonObject]


@dataclass(frozen=True)
class Claim:
    """A request's hold on its key: won (it runs the turn) or the holder's record."""

    key: str
    won: bool
    record: IdempotencyRecord
    raw: str = ""  # what this request wrote, when it won: what `release` may delete

    @property
    def turn_id(self) -> uuid.UUID:
        """The turn that holds (or held) the key."""
        return uuid.UUID(self.record["turn_id"])


@dataclass(frozen=True)
class Waited:
    """What a retry's wait for the first request's answer found (`wait_finished`)."""

    state: Literal["done", "released", "unavailable", "running"]
    record: IdempotencyRecord | None = None


def fingerprint(endpoint: str, body: ChatRequest) -> str:
    """What identifies a request's body: a retry with the same key must send the same."""
    return hashlib.sha256(f"{endpoint}\n{body.model_dump_json()}".encode()).hexdigest()


class IdempotencyStore:
    """The Idempotency-Key records in Redis (see the module docstring): the only code that
    reads or writes their keys."""

    def __init__(
        self,
        redis: RedisHandle,
        ttl_seconds: int,
        running_ttl_seconds: int,
        admission_seconds: int = ADMISSION_SECONDS,
    ) -> None:
        self.redis = redis
        self.ttl = ttl_seconds
        # A claim whose process dies must not block retries for a day: while the turn runs,
        # the key lives a little longer than a model call may take.
        self.running_ttl = min(running_ttl_seconds, ttl_seconds)
        self.admission_ttl = min(admission_seconds, self.running_ttl)
        self._confirm = redis.client.register_script(_CONFIRM)
        # The confirmed claims of this process's running turns, by key: renewed with the
        # turns' leases, since a turn may outlast one running lifetime (slow model calls,
        # their retries, tool rounds), and a key that lapsed under a live turn would let a
        # retry run it a second time.
        self._held: dict[str, Claim] = {}
        self._release = redis.client.register_script(_RELEASE)
        self._record_answer = redis.client.register_script(_RECORD_ANSWER)
        self._adopt = redis.client.register_script(_ADOPT)

    def key(self, tenant_id: uuid.UUID, user_id: uuid.UUID, raw_key: str) -> str:
        """The Redis key of a user's Idempotency-Key."""
        digest = hashlib.sha256(raw_key.encode()).hexdigest()
        return self.redis.key("idem", tenant_id, user_id, digest)

    async def claim(
        self,
        tenant_id: uuid.UUID,
        user_id: uuid.UUID,
        raw_key: str,
        print_: str,
        turn_id: uuid.UUID,
        turn_exists: TurnExists,
    ) -> Claim | None:
        """Claim the key for `turn_id`, or return the record of whoever holds it.

        A finished record whose turn no longer exists (its session was deleted, its user
        erased) is not replayed: it is dropped and the key claimed afresh. None only when
        Redis is down (no connection can be opened): the request then runs without
        idempotency. Redis answering but this claim failing is a 503 with `Retry-After`.
        """
        if not raw_key.strip() or len(raw_key) > MAX_KEY_CHARS:
            raise UnprocessableEntity(
                f"Idempotency-Key must be 1 to {MAX_KEY_CHARS} characters.",
                code="invalid_idempotency_key",
            )
        key = self.key(tenant_id, user_id, raw_key)
        mine = _running(print_, turn_id)
        try:
            claim = await self._claim(key, mine, turn_exists)
        except (RedisError, OSError):
            if await self.redis.reachable():
                logger.warning("idempotency key not claimed though Redis answers", exc_info=True)
                raise IdempotencyUnavailable() from None
            logger.warning("Redis is down: running without idempotency")
            return None
        if claim.record["fingerprint"] != print_:
            raise UnprocessableEntity(
                "This Idempotency-Key was used with a different request.",
                code="idempotency_key_reused",
            )
        return claim

    async def _claim(self, key: str, mine: IdempotencyRecord, turn_exists: TurnExists) -> Claim:
        raw_mine = json.dumps(mine)
        client = self.redis.client
        for _ in range(3):  # the holder may release between our SET and GET
            if await client.set(key, raw_mine, nx=True, ex=self.admission_ttl):
                return Claim(key, True, mine, raw_mine)
            raw = await client.get(key)
            if raw is None:
                continue
            record: IdempotencyRecord = json.loads(raw)
            if record["turn_id"] == mine["turn_id"]:
                # Our own SET, sent again after its reply was lost (a retried command).
                return Claim(key, True, mine, raw_mine)
            if record["state"] == "done" and not await turn_exists(uuid.UUID(record["turn_id"])):
                await self._release(keys=[key], args=[raw])  # its answer is gone: so is the key
                continue
            return Claim(key, False, record)
        raise IdempotencyUnavailable()  # claimed and released under our feet three times

    async def adopt(
        self, claim: Claim, reference: str, turn_id: uuid.UUID, response: JsonObject | None
    ) -> Claim:
        """A won claim whose key Redis had forgotten, although the database holds a turn
        recorded under it (`reference`, the row's `idempotency_key`; ADR 0069): the request is
        a retry of that turn. Its record goes back under the key in place of this claim (the
        finished answer `response`, or the running claim exactly as its owner wrote it, so the
        owner's renewals and final record still match) and the claim is returned as lost.
        Another body with the key is a 422, as when Redis remembers it."""
        print_ = reference.partition("\n")[2]
        if print_ != claim.record["fingerprint"]:
            await self.release(claim)
            raise UnprocessableEntity(
                "This Idempotency-Key was used with a different request.",
                code="idempotency_key_reused",
            )
        if response is None:
            record, ttl = _running(print_, turn_id), self.running_ttl
        else:
            record = _done(print_, turn_id, response)
            ttl = self.ttl
        raw = json.dumps(record, default=str)
        try:
            adopted = await self._adopt(keys=[claim.key], args=[claim.raw, raw, str(ttl)])
        except (RedisError, OSError):
            if await self.redis.reachable():
                raise IdempotencyUnavailable() from None
            adopted = 1  # Redis went down: the row still says which turn this retry is
        if not adopted:  # our claim lapsed meanwhile: someone else holds the key now
            raise IdempotencyUnavailable()
        return Claim(claim.key, False, record)

    async def confirm(self, claim: Claim) -> None:
        """The claim's turn is being recorded: keep the key for the turn's lifetime. Called in
        the admission's transaction, before it commits; raises (so the turn is not recorded)
        when the claim has lapsed meanwhile (a retry may hold the key now) or cannot be kept
        although Redis answers. A Redis that is down lets the turn run, as at the claim."""
        if not claim.won:
            return
        try:
            kept = await self._confirm(keys=[claim.key], args=[claim.raw, self.running_ttl])
        except (RedisError, OSError):
            if await self.redis.reachable():
                raise IdempotencyUnavailable() from None
            return
        if not kept:
            raise IdempotencyUnavailable()
        self._held[claim.key] = claim

    async def renew_held(self, running: Collection[uuid.UUID]) -> None:
        """Extend the claims of the turns this process still runs (`running`) by a running
        lifetime, each only while its key still holds this process's claim; the others are
        let go (their runs have ended: the finisher writes or releases them)."""
        for key, claim in list(self._held.items()):
            if claim.turn_id not in running:
                self._held.pop(key, None)
                continue
            try:
                await self._confirm(keys=[key], args=[claim.raw, self.running_ttl])
            except (RedisError, OSError):  # the next round tries again; no pile of timeouts
                logger.warning("could not renew the idempotency claims", exc_info=True)
                return

    async def release(self, claim: Claim) -> None:
        """Give the key up (the request failed before or while running): a retry may run it
        again. Only this request's own running claim is removed; retried while Redis answers,
        and when it cannot be, the claim expires with its short running lifetime."""
        if claim.won:
            self._held.pop(claim.key, None)
            await self._retried(
                lambda: self._release(keys=[claim.key], args=[claim.raw]), "release"
            )

    async def wait_finished(self, claim: Claim, timeout_seconds: float) -> Waited:
        """Wait up to `timeout_seconds` for the holder's stored record: `done` (with it),
        `released` (the holder failed: the key is gone), `unavailable` (Redis went down) or
        `running` (still running when the time was up). Said explicitly: a caller that told a
        release from a timeout by the time spent mistook one for the other."""
        deadline = time.monotonic() + timeout_seconds
        while True:
            try:
                raw = await self.redis.client.get(claim.key)
            except (RedisError, OSError):
                if not await self.redis.reachable():
                    return Waited("unavailable")  # stop waiting (409, the client retries)
                # transient: the record is still there, read it again
            else:
                if raw is None:
                    return Waited("released")
                record: IdempotencyRecord = json.loads(raw)
                if record["state"] == "done":
                    return Waited("done", record)
            if time.monotonic() >= deadline:
                return Waited("running")
            await asyncio.sleep(_POLL_SECONDS)

    @staticmethod
    def reference(claim: Claim) -> str:
        """What the turn's row keeps of its claim (the key and the request's fingerprint): whoever
        finishes the turn if its process dies records the answer under the key
        (`record_orphan_answer`, app/conversation/durability/orphans.py)."""
        return f"{claim.key}\n{claim.record['fingerprint']}"

    async def record_orphan_answer(
        self, reference: str, user_id: uuid.UUID, turn_id: uuid.UUID, response: JsonObject
    ) -> None:
        """Store the answer of an orphaned turn (finished by another process) under the key
        its row references, so a retry replays it instead of running the turn again. The
        claim may have expired meanwhile: the record is rebuilt; a newer claim of the key
        (for another turn) is left alone. Nothing for an erased user."""
        if await is_erased(self.redis, user_id):
            return
        key, _, print_ = reference.partition("\n")
        raw = json.dumps(_done(print_, turn_id, response), default=str)
        await self._retried(
            lambda: self._record_answer(keys=[key], args=[str(turn_id), raw, str(self.ttl)]),
            "orphan's answer",
        )

    def finisher(self, claim: Claim) -> Finisher:
        """The run's finisher that stores its answer under the key (or releases the key)."""

        async def finish(outcome: RunOutcome) -> None:
            terminal = outcome.terminal
            erased = await is_erased(self.redis, outcome.turn.user_id)
            if erased or terminal is None or terminal.name != "done":
                await self.release(claim)  # failed: a retry may run it again
                return
            self._held.pop(claim.key, None)
            record = IdempotencyRecord(
                fingerprint=claim.record["fingerprint"],
                turn_id=claim.record["turn_id"],
                state="done",
                response=response_of(outcome),
            )
            raw = json.dumps(record, default=str)
            # Only over this turn's own claim (or a lapsed key): never over a newer claim.
            args = [claim.record["turn_id"], raw, str(self.ttl)]
            await self._retried(
                lambda: self._record_answer(keys=[claim.key], args=args), "finished record"
            )

        return finish

    async def _retried(self, write: Callable[[], Awaitable[Any]], what: str) -> None:
        """Run `write` until it lands, for at most WRITE_DEADLINE_SECONDS while Redis answers;
        a Redis that is down ends it at once (the degradation: a running claim then expires
        with its short lifetime)."""
        deadline = time.monotonic() + WRITE_DEADLINE_SECONDS
        for attempt in itertools.count():
            try:
                await write()
                return
            except Exception:
                if time.monotonic() >= deadline or not await self.redis.reachable():
                    logger.warning("idempotency %s not written", what, exc_info=True)
                    return
            await asyncio.sleep(min(_RETRY_CAP, _RETRY_BASE * 2**attempt))


def _running(print_: str, turn_id: uuid.UUID) -> IdempotencyRecord:
    """A running claim's record; its JSON is what `confirm`, `renew_held` and `release`
    compare, so a record put back by `adopt` must be built the same way."""
    return IdempotencyRecord(fingerprint=print_, turn_id=str(turn_id), state="running")


def _done(print_: str, turn_id: uuid.UUID, response: JsonObject) -> IdempotencyRecord:
    """A finished turn's record: its answer, under the request's fingerprint."""
    return IdempotencyRecord(
        fingerprint=print_, turn_id=str(turn_id), state="done", response=response
    )


def response_of(outcome: RunOutcome) -> JsonObject:
    """The `/chat` answer of a finished run (a stopped one included), as recorded."""
    assert outcome.terminal is not None
    assert outcome.terminal.done is not None
    return ChatResponse.of(outcome.terminal.done, outcome.sources).model_dump(mode="json")
