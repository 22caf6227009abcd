"""`Idempotency-Key` on `/chat` and `/chat/stream`: one model call per key.

The first request claims the key with SET NX (atomic, so of ten concurrent retries exactly
one wins) and records its turn id; the winner stores the finished answer under the key. A
retry with the same body returns that answer, or follows the running turn (streams through
the Redis buffer, JSON by waiting for the stored answer). Another body with the same key is
a client bug: 422. A running claim lives `THREADLINE_LLM_TIMEOUT_SECONDS` + 60 s (so a claim
whose process died does not block retries for long); a stored answer lives
`THREADLINE_IDEMPOTENCY_TTL_SECONDS` (24 h). A run that fails, or a request that fails before
its run starts, releases its key, so a retry may try again. Without Redis the header is ignored.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

from app.auth.principal import Principal
from app.chat.schemas import ChatRequest, chat_answer
from app.chat.sse import RunOutcome
from app.core.errors import UnprocessableEntity
from app.core.redis import RedisHandle
from app.privacy.marks import is_erased

logger = logging.getLogger(__name__)

MAX_KEY_CHARS = 255
_POLL_SECONDS = 0.05


@dataclass(frozen=True)
class Claim:
    key: str
    won: bool
    record: dict[str, Any]

    @property
    def turn_id(self) -> uuid.UUID:
        return uuid.UUID(self.record["turn_id"])


def fingerprint(endpoint: str, body: ChatRequest) -> str:
    return hashlib.sha256(f"{endpoint}\n{body.model_dump_json()}".encode()).hexdigest()


class IdempotencyStore:
    def __init__(self, redis: RedisHandle, ttl_seconds: int, running_ttl_seconds: int) -> None:
        self.redis = redis
        self.ttl = ttl_seconds
        # A claim whose process dies must not block retries for a day: while the turn runs,
        # the key lives a little longer than a model call may take.
        self.running_ttl = min(running_ttl_seconds, ttl_seconds)

    def key(self, principal: Principal, raw_key: str) -> str:
        digest = hashlib.sha256(raw_key.encode()).hexdigest()
        return self.redis.key("idem", principal.tenant_id, principal.user_id, digest)

    async def claim(
        self, principal: Principal, raw_key: str, print_: str, turn_id: uuid.UUID
    ) -> Claim | None:
        """Claim the key for `turn_id`, or return the record of whoever holds it.

        None when Redis cannot be reached: the request then runs without idempotency.
        """
        if not raw_key.strip() or len(raw_key) > MAX_KEY_CHARS:
            raise UnprocessableEntity(
                f"Idempotency-Key must be 1 to {MAX_KEY_CHARS} characters.",
                code="invalid_idempotency_key",
            )
        key = self.key(principal, raw_key)
        mine = {"fingerprint": print_, "turn_id": str(turn_id), "state": "running"}
        try:
            for _ in range(3):  # the holder may release between our SET and GET
                if await self.redis.client.set(key, json.dumps(mine), nx=True, ex=self.running_ttl):
                    return Claim(key, True, mine)
                raw = await self.redis.client.get(key)
                if raw is not None:
                    break
            else:
                return None
        except Exception:
            logger.warning("idempotency store unavailable: running without it")
            return None
        record: dict[str, Any] = json.loads(raw)
        if record["fingerprint"] != print_:
            raise UnprocessableEntity(
                "This Idempotency-Key was used with a different request.",
                code="idempotency_key_reused",
            )
        return Claim(key, False, record)

    async def wait_finished(self, claim: Claim, timeout_seconds: float) -> dict[str, Any] | None:
        """The holder's stored record once finished; None if it was released (failed)."""
        deadline = time.monotonic() + timeout_seconds
        while time.monotonic() < deadline:
            raw = await self.redis.client.get(claim.key)
            if raw is None:
                return None
            record: dict[str, Any] = json.loads(raw)
            if record["state"] == "done":
                return record
            await asyncio.sleep(_POLL_SECONDS)
        return None

    def finisher(self, claim: Claim) -> Any:
        async def finish(outcome: RunOutcome) -> None:
            terminal = outcome.terminal
            erased = await is_erased(self.redis, outcome.turn.user_id)
            if erased or terminal is None or terminal.name != "done":
                await self.redis.client.delete(claim.key)  # failed: a retry may run it again
                return
            record = {**claim.record, "state": "done", "response": response_of(outcome)}
            await self.redis.client.set(claim.key, json.dumps(record, default=str), ex=self.ttl)

        return finish


def response_of(outcome: RunOutcome) -> dict[str, Any]:
    """The `/chat` answer of a finished run (a stopped one included)."""
    assert outcome.terminal is not None
    turn = outcome.turn
    return chat_answer(turn.session_id, turn.turn_id, outcome.terminal.data, outcome.sources)
