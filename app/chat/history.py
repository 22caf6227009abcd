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

from app.chat.repository import SessionStateRepository, TurnRepository
from app.core.redis import RedisHandle
from app.graph.state import HistoryTurn

logger = logging.getLogger(__name__)


class HistorySnapshot(TypedDict):
    turns: list[HistoryTurn]
    """The last finished turns, oldest first."""
    total: int
    summary: str
    summarized_turns: int


class HistoryStore:
    def __init__(self, redis: RedisHandle, *, limit: int, ttl_seconds: int) -> None:
        self.redis = redis
        self.limit = limit
        self.ttl = ttl_seconds

    def key(self, tenant_id: uuid.UUID, session_id: uuid.UUID) -> str:
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
        self, db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID
    ) -> HistorySnapshot:
        turns = TurnRepository(db, tenant_id)
        summary, summarized = await SessionStateRepository(db, tenant_id).summary(session_id)
        return HistorySnapshot(
            turns=await turns.recent(session_id, self.limit),
            total=await turns.count_finished(session_id),
            summary=summary,
            summarized_turns=summarized,
        )

    async def load(
        self, db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID
    ) -> tuple[HistorySnapshot, str]:
        """The snapshot, and where it came from ("cache" or "database")."""
        key = self.key(tenant_id, session_id)
        cached = await self._cached(key)
        if cached is not None:
            return cached, "cache"
        snapshot = await self._from_database(db, tenant_id, session_id)
        await self._store(key, snapshot)
        return snapshot, "database"

    async def refresh(self, db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID) -> None:
        snapshot = await self._from_database(db, tenant_id, session_id)
        await self._store(self.key(tenant_id, session_id), snapshot)

    async def drop(self, tenant_id: uuid.UUID, session_id: uuid.UUID) -> None:
        try:
            await self.redis.client.delete(self.key(tenant_id, session_id))
        except Exception:
            logger.warning("history cache unavailable", exc_info=True)
