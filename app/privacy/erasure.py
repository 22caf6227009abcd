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
from typing import Any, cast

from sqlalchemy import CursorResult, delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import Conflict
from app.core.redis import RedisHandle
from app.models import (
    Attachment,
    AttachmentChunk,
    ChatSession,
    KbDocument,
    QueryHistory,
    SessionAttachment,
    User,
)
from app.privacy.checkpoints import delete_threads

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
        counts = asdict(self)
        counts.pop("ids")
        return counts


def _rows(result: Any) -> int:
    return int(cast(CursorResult[Any], result).rowcount)


async def refuse_last_admin(db: AsyncSession, tenant_id: uuid.UUID, user_id: uuid.UUID) -> None:
    """409 `last_admin` when the user is the tenant's only admin: nobody could then manage
    its users, keys or knowledge base. The admins are locked until the erasure commits, so
    two admins erasing each other at once cannot both succeed."""
    admins = (
        await db.execute(
            select(User.id)
            .where(User.tenant_id == tenant_id, User.role == "admin")
            .order_by(User.id)
            .with_for_update()
        )
    ).scalars()
    if list(admins) == [user_id]:
        raise Conflict(
            "This is the tenant's last admin: make another user admin first.",
            code="last_admin",
        )


async def erase_user(db: AsyncSession, tenant_id: uuid.UUID, user_id: uuid.UUID) -> Erased:
    """Remove the user's data in `db`'s transaction; nothing (all zeros) if they are gone."""
    erased = Erased()
    # Locks the user: a concurrent erasure of the same user waits, then finds nothing.
    found = await db.execute(
        select(User.id).where(User.tenant_id == tenant_id, User.id == user_id).with_for_update()
    )
    if found.scalar_one_or_none() is None:
        return erased
    erased.ids.add(str(user_id))
    session_ids = list(
        (
            await db.execute(
                select(ChatSession.id).where(
                    ChatSession.tenant_id == tenant_id, ChatSession.user_id == user_id
                )
            )
        ).scalars()
    )
    attachment_ids = select(Attachment.id).where(
        Attachment.tenant_id == tenant_id, Attachment.user_id == user_id
    )
    turn_ids = (
        await db.execute(
            delete(QueryHistory)
            .where(QueryHistory.tenant_id == tenant_id, QueryHistory.user_id == user_id)
            .returning(QueryHistory.id)
        )
    ).scalars()
    turn_list = [str(t) for t in turn_ids]
    erased.turns = len(turn_list)
    erased.ids.update(turn_list)
    # Before the sessions: the checkpoint policy finds a thread through its session.
    erased.checkpoints = await delete_threads(db, session_ids)
    await db.execute(
        delete(SessionAttachment).where(
            SessionAttachment.tenant_id == tenant_id,
            SessionAttachment.session_id.in_(session_ids)
            | SessionAttachment.attachment_id.in_(attachment_ids),
        )
    )
    erased.chunks = _rows(
        await db.execute(
            delete(AttachmentChunk).where(
                AttachmentChunk.tenant_id == tenant_id,
                AttachmentChunk.attachment_id.in_(attachment_ids),
            )
        )
    )
    removed_attachments = (
        await db.execute(
            delete(Attachment)
            .where(Attachment.tenant_id == tenant_id, Attachment.user_id == user_id)
            .returning(Attachment.id)
        )
    ).scalars()
    attachment_list = [str(a) for a in removed_attachments]
    erased.attachments = len(attachment_list)
    erased.ids.update(attachment_list)
    erased.sessions = _rows(
        await db.execute(
            delete(ChatSession).where(
                ChatSession.tenant_id == tenant_id, ChatSession.user_id == user_id
            )
        )
    )
    erased.ids.update(str(s) for s in session_ids)
    await db.execute(
        update(KbDocument)
        .where(KbDocument.tenant_id == tenant_id, KbDocument.created_by == user_id)
        .values(created_by=None)
    )
    # API keys and refresh-token families go with the user (ON DELETE CASCADE).
    erased.users = _rows(
        await db.execute(delete(User).where(User.tenant_id == tenant_id, User.id == user_id))
    )
    return erased


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
