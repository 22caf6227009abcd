"""Session history for the pipeline: Redis first, PostgreSQL on a miss (then cached).

The cached snapshot holds the last `limit` finished turns of a session, the number of finished
turns, and the session's running summary. It is rebuilt from PostgreSQL after every persisted
turn and dropped when the session is deleted, so it is never the source of truth: with Redis
down or flushed, history comes from PostgreSQL.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import TypedDict

from sqlalchemy.ext.asyncio import AsyncSession

from app.conversation.repository import SessionStateRepository, TurnRepository
from app.conversation.turn.types import HistoryTurn
from app.core.redis import RedisHandle
from app.pii.marks import mark_key

logger = logging.getLogger(__name__)


class HistorySnapshot(TypedDict):
    """What the history cache holds for a session: recent turns, their count and the summary."""

    turns: list[HistoryTurn]
    """The last finished turns, oldest first (the window and a few older ones)."""
    total: int
    summary: str
    summarized_turns: int


# Turns cached beyond the history window by default: the ones that left it and wait for the
# background summary, so a turn reads every turn the summary does not cover without a query.
FOLD_SLACK = 10

# Store a snapshot unless the session was erased meanwhile or a newer snapshot (more finished
# turns, or as many with a summary covering more of them: the background fold and a turn may
# store at once) is already there: the check and the write in one round trip, atomically.
_STORE_NEWEST = """
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
local current = redis.call('GET', KEYS[1])
if current then
  local held = cjson.decode(current)
  local total, covered = tonumber(ARGV[2]), tonumber(ARGV[4])
  if held['total'] > total then return 0 end
  if held['total'] == total and (held['summarized_turns'] or 0) > covered then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[3])
return 1
"""


class HistoryStore:
    """A session's recent history: read from the Redis cache, else PostgreSQL, and kept fresh."""

    def __init__(
        self, redis: RedisHandle, *, limit: int, ttl_seconds: int, slack: int = FOLD_SLACK
    ) -> None:
        self.redis = redis
        self.limit = limit
        self.slack = slack
        """Turns kept beyond the window: those waiting to be folded into the summary."""
        self.ttl = ttl_seconds
        self._store_newest = redis.client.register_script(_STORE_NEWEST)

    def key(self, tenant_id: uuid.UUID, session_id: uuid.UUID) -> str:
        """The Redis key of a session's cached history."""
        return self.redis.key("history", tenant_id, session_id)

    async def _cached(self, key: str) -> HistorySnapshot | None:
        try:
            raw = await self.redis.client.get(key)
        except Exception:  # Redis down: PostgreSQL answers
            logger.warning("history cache unavailable", exc_info=True)
            return None
        if raw is None:
            return None
        snapshot: HistorySnapshot = json.loads(raw)
        return snapshot

    async def _store(self, key: str, snapshot: HistorySnapshot) -> None:
        try:
            await self.redis.client.set(key, json.dumps(snapshot), ex=self.ttl)
        except Exception:
            logger.warning("history cache unavailable", exc_info=True)

    async def _from_database(
        self,
        db: AsyncSession,
        tenant_id: uuid.UUID,
        session_id: uuid.UUID,
        summary: tuple[str, int] | None = None,
    ) -> HistorySnapshot:
        cached = self.limit + self.slack if self.limit else 0
        turns, total = await TurnRepository(db, tenant_id).recent(session_id, cached)
        if summary is None:
            summary = await SessionStateRepository(db, tenant_id).summary(session_id)
        return HistorySnapshot(
            turns=turns, total=total, summary=summary[0], summarized_turns=summary[1]
        )

    async def load(
        self,
        db: AsyncSession,
        tenant_id: uuid.UUID,
        session_id: uuid.UUID,
        expected_total: int = -1,
    ) -> tuple[HistorySnapshot, str]:
        """The snapshot, and where it came from ("cache" or "database"). A cached snapshot
        that does not count `expected_total` finished turns (the database's count, when the
        caller has it) is stale — the write after a turn's commit failed, or its process died
        in between — and is read again from the database."""
        key = self.key(tenant_id, session_id)
        cached = await self._cached(key)
        if cached is not None and expected_total in (-1, cached["total"]):
            return cached, "cache"
        if cached is not None:
            logger.info("stale history cache", extra={"session": str(session_id)})
        snapshot = await self._from_database(db, tenant_id, session_id)
        await self._store(key, snapshot)
        return snapshot, "database"

    async def snapshot(
        self,
        db: AsyncSession,
        tenant_id: uuid.UUID,
        session_id: uuid.UUID,
        summary: tuple[str, int] | None = None,
    ) -> HistorySnapshot:
        """The snapshot as `db` sees it; `summary` (text, turns covered) saves a query when the
        caller just wrote it. Take it inside the transaction that changed the turns and
        `store` it after the commit: the cache then holds exactly what committed."""
        return await self._from_database(db, tenant_id, session_id, summary)

    def extended(
        self, snapshot: HistorySnapshot, turn: HistoryTurn, summary: tuple[str, int]
    ) -> HistorySnapshot:
        """`snapshot` with one more finished turn: valid when no other turn of the session
        finished since `snapshot` was taken (the caller checks)."""
        keep = self.limit + self.slack if self.limit else 0
        turns = [*snapshot["turns"], turn][-keep:] if keep else []
        return HistorySnapshot(
            turns=turns,
            total=snapshot["total"] + 1,
            summary=summary[0],
            summarized_turns=summary[1],
        )

    async def store(
        self, tenant_id: uuid.UUID, session_id: uuid.UUID, snapshot: HistorySnapshot
    ) -> None:
        """Cache `snapshot` unless a newer one (more finished turns, or a summary covering
        more) is already there: two turns of one session finishing close together, or a turn
        and the summary job, must not leave the older view."""
        keys = [self.key(tenant_id, session_id), mark_key(self.redis, session_id)]
        try:
            await self._store_newest(
                keys=keys,
                args=[
                    json.dumps(snapshot),
                    snapshot["total"],
                    self.ttl,
                    snapshot["summarized_turns"],
                ],
            )
        except Exception:
            logger.warning("history cache unavailable", exc_info=True)

    async def refresh(self, db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID) -> None:
        """Re-read a session's history from PostgreSQL into the cache."""
        await self.store(tenant_id, session_id, await self.snapshot(db, tenant_id, session_id))

    async def drop(self, tenant_id: uuid.UUID, session_id: uuid.UUID) -> None:
        """Forget a session's cached history (deleted or erased data)."""
        try:
            await self.redis.client.delete(self.key(tenant_id, session_id))
        except Exception:
            logger.warning("history cache unavailable", exc_info=True)
