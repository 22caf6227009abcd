"""FastAPI dependencies shared by every domain: resources and the request's transaction."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.core.jobs import RUNNER
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

    Function scope: the commit happens before the response is sent, so a failed commit is
    the client's error response, never a 2xx for data that was not stored.
    """
    resources = resources_of(request)
    async with resources.sessionmaker() as session:
        session.info[RUNNER] = resources.jobs  # jobs enqueued in this request run after commit
        try:
            yield session
        except BaseException:
            await session.rollback()
            raise
        else:
            await session.commit()


ResourcesDep = Annotated[Resources, Depends(get_resources)]
DbSession = Annotated[AsyncSession, Depends(get_db, scope="function")]


async def get_settings_dep(resources: ResourcesDep) -> Settings:
    return resources.settings


async def get_redis(resources: ResourcesDep) -> RedisHandle:
    return resources.redis


SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
RedisDep = Annotated[RedisHandle, Depends(get_redis)]
