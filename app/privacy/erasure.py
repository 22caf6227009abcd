"""Erasure of one user: every row that is theirs, in one transaction, then their cache keys.

The database part runs in the caller's tenant-scoped transaction: the user's turns, the
LangGraph threads of their sessions (every checkpoint table), their attachments with chunks and
embeddings, session links, sessions, API keys and logins, and the user row itself; documents
they added to the knowledge base stay (they belong to the tenant) without their name on them.
The audit log keeps its entries (accountability, docs/adr/0009). Redis is cleaned after the
commit: a cache is never the source of truth, so a failure there leaves only keys that expire.
"""

from __future__ import annotations

import logging
import re
import uuid
from dataclasses import asdict, dataclass, field

from sqlalchemy.ext.asyncio import AsyncSession

from app.conversation.checkpoints.repository import delete_threads
from app.core.errors import Conflict
from app.core.redis import RedisHandle
from app.privacy.repository.erasure import ErasureRepository

logger = logging.getLogger(__name__)

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@dataclass
class Erased:
    """What an erasure removed (SPEC §6 names), and the ids whose cache keys must go."""

    sessions: int = 0
    turns: int = 0
    attachments: int = 0
    chunks: int = 0
    checkpoints: int = 0
    cache_keys: int = 0
    users: int = 0
    ids: set[str] = field(default_factory=set, repr=False)

    def counts(self) -> dict[str, int]:
        """The counts by name, without the ids."""
        counts = asdict(self)
        counts.pop("ids")
        return counts


async def refuse_last_admin(db: AsyncSession, tenant_id: uuid.UUID, user_id: uuid.UUID) -> None:
    """409 `last_admin` when the user is the tenant's only admin: nobody could then manage
    its users, keys or knowledge base. The admins are locked until the erasure commits, so
    two admins erasing each other at once cannot both succeed."""
    if await ErasureRepository(db, tenant_id).lock_admins() == [user_id]:
        raise Conflict(
            "This is the tenant's last admin: make another user admin first.",
            code="last_admin",
        )


async def erase_user(db: AsyncSession, tenant_id: uuid.UUID, user_id: uuid.UUID) -> Erased:
    """Remove the user's data in `db`'s transaction; nothing (all zeros) if they are gone."""
    rows = ErasureRepository(db, tenant_id)
    erased = Erased()
    # Locks the user: a concurrent erasure of the same user waits, then finds nothing.
    if not await rows.lock_user(user_id):
        return erased
    erased.ids.add(str(user_id))
    session_ids = await rows.session_ids(user_id)
    await _erase_turns(rows, user_id, erased)
    # Before the sessions: the checkpoint policy finds a thread through its session.
    erased.checkpoints = await delete_threads(db, session_ids)
    await rows.delete_session_links(user_id, session_ids)
    await _erase_attachments(rows, user_id, erased)
    erased.sessions = await rows.delete_sessions(user_id)
    erased.ids.update(str(s) for s in session_ids)
    await rows.forget_document_authorship(user_id)
    # API keys and refresh-token families go with the user (ON DELETE CASCADE).
    erased.users = await rows.delete_user(user_id)
    return erased


async def _erase_turns(rows: ErasureRepository, user_id: uuid.UUID, erased: Erased) -> None:
    turn_ids = await rows.delete_turns(user_id)
    erased.turns = len(turn_ids)
    erased.ids.update(turn_ids)


async def _erase_attachments(rows: ErasureRepository, user_id: uuid.UUID, erased: Erased) -> None:
    erased.chunks = await rows.delete_attachment_chunks(user_id)
    attachment_ids = await rows.delete_attachments(user_id)
    erased.attachments = len(attachment_ids)
    erased.ids.update(attachment_ids)


async def purge_cache_keys(redis: RedisHandle, ids: set[str]) -> int:
    """Delete every key under Threadline's prefix that names one of `ids` (history snapshots,
    and whatever else is keyed by a user, session, turn or attachment). One SCAN of the
    prefix: erasure is rare, and this finds keys no list of patterns would remember."""
    if not ids:
        return 0
    removed = 0
    try:
        batch: list[bytes | str] = []
        async for key in redis.client.scan_iter(match=f"{redis.prefix}*", count=1000):
            name = key.decode() if isinstance(key, bytes) else str(key)
            if any(found in ids for found in _UUID.findall(name)):
                batch.append(key)
            if len(batch) >= 500:
                removed += int(await redis.client.delete(*batch))
                batch = []
        if batch:
            removed += int(await redis.client.delete(*batch))
    except Exception:
        logger.warning("cache keys of an erased user not removed (they expire)", exc_info=True)
    return removed
