"""Refresh-token rotation under real browsers: two tabs presenting the same refresh token at
once keep the login (the reuse window), while a replay after the window still revokes it."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.auth import service
from app.config import Settings
from app.core.db import scope_to_tenant
from app.core.errors import RefreshTokenReused
from app.models import User
from tests.factories import login, make_tenant, make_user


async def _age_exchanges(db: AsyncSession, user: User, seconds: int) -> None:
    """Move every recorded exchange of the user's tenant `seconds` into the past."""
    await scope_to_tenant(db, user.tenant_id)
    await db.execute(
        text("UPDATE refresh_token_uses SET created_at = created_at - make_interval(secs => :s)"),
        {"s": seconds},
    )
    await db.commit()


@pytest.mark.committed  # concurrent refreshes: each request needs its own connection
async def test_two_tabs_refreshing_at_once_ten_times_keep_the_login(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    session = await login(client, await make_user(db, await make_tenant(db)))
    token = session.refresh_token
    for attempt in range(10):
        tabs = await asyncio.gather(
            client.post("/auth/refresh", json={"refresh_token": token}),
            client.post("/auth/refresh", json={"refresh_token": token}),
        )
        assert [tab.status_code for tab in tabs] == [200, 200], (attempt, tabs[1].text)
        first, second = (tab.json() for tab in tabs)
        assert first == second, "both tabs get the one pair the exchange gave"
        token = first["refresh_token"]
        me = await client.get("/me", headers={"Authorization": f"Bearer {first['access_token']}"})
        assert me.status_code == 200, (attempt, me.text)
    assert (await client.get("/me", headers=session.headers)).status_code == 200


async def test_the_same_token_again_within_the_window_returns_the_same_pair(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    session = await login(client, await make_user(db, await make_tenant(db)))
    first = await client.post("/auth/refresh", json={"refresh_token": session.refresh_token})
    again = await client.post("/auth/refresh", json={"refresh_token": session.refresh_token})
    assert first.status_code == again.status_code == 200, again.text
    assert first.json() == again.json()
    # The pair keeps working: its refresh token rotates on as usual.
    onward = await client.post(
        "/auth/refresh", json={"refresh_token": first.json()["refresh_token"]}
    )
    assert onward.status_code == 200
    assert onward.json()["refresh_token"] != first.json()["refresh_token"]


async def test_a_replay_after_the_window_still_revokes_the_login(
    client: httpx.AsyncClient, db: AsyncSession, settings: Settings
) -> None:
    user = await make_user(db, await make_tenant(db))
    session = await login(client, user)
    legit = await client.post("/auth/refresh", json={"refresh_token": session.refresh_token})
    assert legit.status_code == 200
    await _age_exchanges(db, user, settings.refresh_reuse_window_seconds + 1)

    replay = await client.post("/auth/refresh", json={"refresh_token": session.refresh_token})
    assert replay.status_code == 401
    assert replay.json()["error"]["code"] == "token_reused"
    descendant = legit.json()
    again = await client.post("/auth/refresh", json={"refresh_token": descendant["refresh_token"]})
    assert again.json()["error"]["code"] == "token_revoked"
    me = await client.get("/me", headers={"Authorization": f"Bearer {descendant['access_token']}"})
    assert me.status_code == 401


async def test_a_window_of_zero_treats_every_second_use_as_a_replay(
    client: httpx.AsyncClient,
    db: AsyncSession,
    settings: Settings,
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    session = await login(client, await make_user(db, await make_tenant(db)))
    strict = settings.model_copy(update={"refresh_reuse_window_seconds": 0})
    await service.refresh(sessionmaker, strict, session.refresh_token)
    with pytest.raises(RefreshTokenReused):
        await service.refresh(sessionmaker, strict, session.refresh_token)
    assert (await client.get("/me", headers=session.headers)).status_code == 401
