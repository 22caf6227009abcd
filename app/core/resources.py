"""What the running application holds: built once in lifespan, reached through `app.state`."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.config import Settings
from app.core.database_urls import DatabaseUrls
from app.core.redis import RedisHandle


@dataclass
class Resources:
    settings: Settings
    urls: DatabaseUrls
    engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]
    redis: RedisHandle
