"""FastAPI dependencies shared by every domain: the request's transaction, settings and Redis.

They read the composition root (`app.state.resources`, built by the lifespan) into typed
locals without importing it: `app/resources.py` sits above every domain (docs/architecture.md),
and each domain's own `deps.py` does the same for what only it uses.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.core.jobs import RUNNER, JobRunner
from app.core.redis import RedisHandle

# Dependencies are `async def` even when they do not await: FastAPI runs a plain `def`
# dependency in its thread pool, a thread hop per request for a dictionary lookup.


async def get_db(request: Request) -> AsyncIterator[AsyncSession]:
    """One transaction per request: committed when the endpoint returns, rolled back on error.

    The only owner of the request's transaction: services and repositories never commit; what
    must follow the commit (a job, a cache that forgets) is buffered with `on_commit`.
    Function scope: the commit happens before the response is sent, so a failed commit is
    the client's error response, never a 2xx for data that was not stored.
    """
    sessionmaker: async_sessionmaker[AsyncSession] = request.app.state.resources.sessionmaker
    jobs: JobRunner = request.app.state.resources.jobs
    async with sessionmaker() as db:
        db.info[RUNNER] = jobs  # jobs enqueued in this request run after commit
        try:
            yield db
        except BaseException:
            await db.rollback()
            raise
        else:
            await db.commit()


DbSession = Annotated[AsyncSession, Depends(get_db, scope="function")]


async def get_settings_dep(request: Request) -> Settings:
    """The application's settings."""
    settings: Settings = request.app.state.resources.settings
    return settings


async def get_redis(request: Request) -> RedisHandle:
    """The application's Redis handle."""
    redis: RedisHandle = request.app.state.resources.redis
    return redis


async def get_sessionmaker(request: Request) -> async_sessionmaker[AsyncSession]:
    """The application's session factory, for work that needs a transaction of its own."""
    sessionmaker: async_sessionmaker[AsyncSession] = request.app.state.resources.sessionmaker
    return sessionmaker


SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
RedisDep = Annotated[RedisHandle, Depends(get_redis)]
SessionmakerDep = Annotated[async_sessionmaker[AsyncSession], Depends(get_sessionmaker)]
