"""How many streams one user may follow: resumes (`GET /chat/{turn}/stream`) and retried
streams that join a running turn.

Following costs little now (one reader for the whole process, `tail.py`), but each follower
still holds a socket, a queue and a heartbeat, and announces itself to the generating process.
So a user may follow at most `sse_follow_max_per_user` streams at once in one process, at
most `sse_follow_max_per_turn` of one turn (a few tabs and a reconnecting phone), and start
at most `sse_follow_per_user_per_min` a minute across processes (counted in Redis). Issue 33:
300 concurrent resumes of one slow turn by one member took chat away from every tenant.

The concurrent counts are checked when the request arrives (a clean 429) and taken when the
stream starts: requests that arrived together and all passed the check are still held to the
bound, the late ones ending at once with an `error` event (`too_many_streams`).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator

from redis.exceptions import RedisError

from app.config import Settings
from app.core.errors import ServiceUnavailable, TooManyRequests
from app.core.redis import RedisHandle

logger = logging.getLogger(__name__)

TOO_MANY_MESSAGE = "Too many streams followed at once; close one and resume again."
TOO_MANY_EVENT = (
    "event: error\ndata: "
    + json.dumps({"code": "too_many_streams", "message": TOO_MANY_MESSAGE}, separators=(",", ":"))
    + "\n\n"
).encode()
"""No `id:`: resuming later from the same Last-Event-ID misses nothing."""


class FollowLimits:
    """The per-user bounds on followed streams (see the module docstring)."""

    def __init__(self, redis: RedisHandle, settings: Settings) -> None:
        self.redis = redis
        self.per_user = settings.sse_follow_max_per_user
        self.per_turn = settings.sse_follow_max_per_turn
        self.per_minute = settings.sse_follow_per_user_per_min
        self._users: Counter[uuid.UUID] = Counter()
        self._turns: Counter[tuple[uuid.UUID, uuid.UUID]] = Counter()

    def _full(self, user_id: uuid.UUID, turn_id: uuid.UUID) -> bool:
        return (
            self._users[user_id] >= self.per_user
            or self._turns[(user_id, turn_id)] >= self.per_turn
        )

    def refuse_if_full(self, user_id: uuid.UUID, turn_id: uuid.UUID) -> None:
        """429 when the user follows as many streams as allowed (of all, or of this turn)."""
        if self._full(user_id, turn_id):
            raise TooManyRequests(TOO_MANY_MESSAGE, code="too_many_streams")

    def refuse_if_turn_full(self, user_id: uuid.UUID, turn_id: uuid.UUID) -> None:
        """429 when the user follows this turn as many times as allowed: it is running here,
        so a resume could only follow it too (before authentication, ADR 0093; the bound
        on all of the user's streams waits for it, as a finished turn is read from its row
        whatever else the user follows)."""
        if self._turns[(user_id, turn_id)] >= self.per_turn:
            raise TooManyRequests(TOO_MANY_MESSAGE, code="too_many_streams")

    async def admit(self, user_id: uuid.UUID, turn_id: uuid.UUID) -> None:
        """429 when the user follows as many streams as allowed, or started too many this
        minute; 503 when Redis answers but the count failed."""
        self.refuse_if_full(user_id, turn_id)
        if not self.per_minute:
            return
        now = time.time()
        key = self.redis.key("rl", "follow", user_id, int(now // 60))
        try:
            async with self.redis.client.pipeline(transaction=False) as pipe:
                pipe.incr(key)
                pipe.expire(key, 61)
                count, _ = await pipe.execute()
        except (RedisError, OSError):
            if await self.redis.reachable():
                raise ServiceUnavailable(
                    "Streams cannot be resumed right now.",
                    code="resume_unavailable",
                    headers={"Retry-After": "1"},
                ) from None
            return  # Redis down: no stream can be followed anyway; the stream says so
        if int(count) > self.per_minute:
            raise TooManyRequests(
                "Too many streams resumed this minute; retry shortly.",
                code="too_many_streams",
                headers={"Retry-After": str(int(60 - now % 60) + 1)},
            )

    async def bounded(
        self, user_id: uuid.UUID, turn_id: uuid.UUID, events: AsyncIterator[bytes]
    ) -> AsyncIterator[bytes]:
        """`events`, holding one of the user's places while they are sent; ended at once
        with `too_many_streams` when no place is free."""
        if self._full(user_id, turn_id):
            yield TOO_MANY_EVENT
            return
        self._users[user_id] += 1
        self._turns[(user_id, turn_id)] += 1
        try:
            async for chunk in events:
                yield chunk
        finally:
            self._give_back(user_id, turn_id)

    def _give_back(self, user_id: uuid.UUID, turn_id: uuid.UUID) -> None:
        self._users[user_id] -= 1
        if self._users[user_id] <= 0:
            del self._users[user_id]
        self._turns[(user_id, turn_id)] -= 1
        if self._turns[(user_id, turn_id)] <= 0:
            del self._turns[(user_id, turn_id)]
