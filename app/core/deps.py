"""FastAPI dependencies shared by every domain: resources and the request's transaction."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.core.jobs import RUNNER, JobRunner
from app.core.redis import RedisHandle
from app.resources import Resources

# Dependencies are `async def` even when they do not await: FastAPI runs a plain `def`
# dependency in its thread pool, a thread hop per request for a dictionary lookup.


def resources_of(request: Request) -> Resources:
    resources: Resources = request.app.state.resources
    return resources


async def get_resources(request: Request) -> Resources:
    return resources_of(request)


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


# The whole composition root as a dependency: only app/chat's endpoints still take it (their
# branch replaces it with typed dependencies); every other endpoint asks for what it uses.
ResourcesDep = Annotated[Resources, Depends(get_resources)]
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
