"""Erasing a user, as one flow: refuse the last admin, stop their turns, delete their rows,
log it, commit, then purge their cache keys.

The erasure owns its transaction (a database session of its own from the sessionmaker, not the
request's): its response says how many cache keys were purged, and the purge may only start
once the deletion has committed, or a turn could re-cache what was just deleted. The request
dependency commits after the endpoint has built its response, too late for both.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.audit.log import record
from app.auth.principal import Principal
from app.core.db import scope_to_tenant
from app.core.errors import Forbidden
from app.core.redis import RedisHandle
from app.groups.service import remove_memberships
from app.pii.marks import mark_erased
from app.privacy.erasure import Erased, erase_user, purge_cache_keys, refuse_last_admin
from app.privacy.repository.erasure import ErasureRepository

logger = logging.getLogger(__name__)
_STOP_WAIT_SECONDS = 5.0


class TurnStopper(Protocol):
    """Asks a running turn to stop (the chat domain's stream registry)."""

    async def stop(self, turn_id: uuid.UUID) -> bool:
        """Ask the turn to stop; whether it was running."""


async def erase(
    sessionmaker: async_sessionmaker[AsyncSession],
    redis: RedisHandle,
    streams: TurnStopper,
    actor: Principal,
    user_id: uuid.UUID,
) -> Erased | None:
    """Erase a user of the actor's tenant; None when there is no such user (any more).

    Refused (403 `whole_account_required`) to a credential that carries less than its
    account's role, such as a member key of an admin: erasure is for the account's own
    full-power login or key, never for a key made to do less (docs/adr/0047)."""
    if not actor.holds_whole_account:
        raise Forbidden(
            "This key carries less than its account's role and may not erase an account: "
            "sign in, or use a key with the account's own role.",
            code="whole_account_required",
        )
    async with sessionmaker() as db:
        await scope_to_tenant(db, actor.tenant_id)
        async with db.begin():  # commits here: the data is gone before the caches are touched
            erased = await _erase_rows(db, redis, streams, actor, user_id)
    if erased is None:
        return None
    erased.cache_keys = await purge_cache_keys(redis, erased.ids)
    return erased


async def _erase_rows(
    db: AsyncSession,
    redis: RedisHandle,
    streams: TurnStopper,
    actor: Principal,
    user_id: uuid.UUID,
) -> Erased | None:
    await refuse_last_admin(db, actor.tenant_id, user_id)  # before anything is stopped
    await _stop_running_turns(db, redis, streams, actor.tenant_id, user_id)
    # Memberships go with the user (the foreign key would cascade); removed first so the
    # audit log records which groups they left (ADR 0078).
    await remove_memberships(db, actor.tenant_id, actor.user_id, user_id)
    erased = await erase_user(db, actor.tenant_id, user_id)
    if not erased.users:
        if await ErasureRepository(db, actor.tenant_id).erased_before(user_id):
            # A retry (say Redis was down the first time): clean up what still names the id.
            # Only for a user this tenant erased: never another tenant's user's keys.
            await purge_cache_keys(redis, {str(user_id)})
        return None
    await record(
        db,
        actor,
        "user.erased",
        target_user_id=user_id,
        resource=f"users/{user_id}",
        details={"deleted": {**erased.counts()}},
    )
    return erased


async def _stop_running_turns(
    db: AsyncSession,
    redis: RedisHandle,
    streams: TurnStopper,
    tenant_id: uuid.UUID,
    user_id: uuid.UUID,
) -> None:
    """Mark the user and their sessions erased, then stop their running turns: a turn that
    goes on (or finishes) after the purge must not write their data back to Redis. Only for
    a user of this tenant: nobody marks another tenant's user."""
    rows = ErasureRepository(db, tenant_id)
    if not await rows.user_exists(user_id):
        return
    await mark_erased(redis, [user_id, *(await rows.session_ids(user_id))])
    reached = False
    for turn_id in await rows.pending_turn_ids(user_id):
        try:
            reached = await streams.stop(turn_id) or reached
        except Exception:  # Redis down: the marks still keep its writes out
            logger.warning("could not stop a turn of an erased user", exc_info=True)
    # Wait (bounded) until they have ended: a stopped run still writes its last checkpoint,
    # which the erasure must find and delete. A turn whose process died stays pending.
    running = reached
    deadline = time.monotonic() + _STOP_WAIT_SECONDS
    while running and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        running = await rows.has_pending_turn(user_id)
