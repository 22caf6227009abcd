"""What the running application holds: built once in lifespan, reached through `app.state`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.config import Settings
from app.core.database_urls import DatabaseUrls
from app.core.redis import RedisHandle

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

    from app.conversation.durability.guards import ChatGuards
    from app.conversation.history import HistoryStore
    from app.conversation.pipeline.context import TurnContext
    from app.conversation.pipeline.runner import TurnRunner
    from app.core.jobs import CeleryJobs, InProcessJobs
    from app.ingestion.pipeline import IngestionDeps
    from app.retrieval.hybrid import HybridRetriever


@dataclass
class Resources:
    """Everything the running application holds, built once at start-up by the lifespan."""

    settings: Settings
    urls: DatabaseUrls
    engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]
    redis: RedisHandle
    history: HistoryStore
    checkpoint_pool: AsyncConnectionPool[Any]
    turn_context: TurnContext
    runner: TurnRunner
    retriever: HybridRetriever
    ingestion: IngestionDeps
    jobs: InProcessJobs | CeleryJobs
    guards: ChatGuards

    def use_sessionmaker(self, sessionmaker: async_sessionmaker[AsyncSession]) -> None:
        """Route every database session of the app (requests and pipeline) through this one."""
        self.sessionmaker = sessionmaker
        self.turn_context.sessionmaker = sessionmaker
        self.ingestion.sessionmaker = sessionmaker
