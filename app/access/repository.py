"""The collections a user may see now: by the collection's visibility, the user's groups,
their role and the conversation's chosen scope.

Read at the start of every request and every turn, never cached beyond it (issue 30, item 4):
removing a member or re-scoping a collection applies to the next request. The result is set
as the transaction-local `threadline.collections` (`app.core.db.restrict_to_collections`),
which the row-level-security policies of `kb_documents` and `kb_chunks` read (migration 0031).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import ARRAY, Text, column, delete, insert, select, text
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.db import COLLECTIONS, restrict_to_collections, set_scope
from app.models import AuditLog, KbDocument, SessionCollection

# `admin` NULL: the account's own role decides (a turn knows the user, not the credential).
_VISIBLE_SQL = """
    SELECT c.id FROM kb_collections c
    WHERE c.tenant_id = :tenant AND c.status = 'active'
      AND (
        c.visibility = 'tenant'
        OR coalesce(CAST(:admin AS boolean), EXISTS (
             SELECT 1 FROM users u
             WHERE u.tenant_id = :tenant AND u.id = :user AND u.role = 'admin'))
        OR EXISTS (
             SELECT 1 FROM kb_collection_groups g
             JOIN group_members m ON m.tenant_id = g.tenant_id AND m.group_id = g.group_id
             WHERE g.tenant_id = :tenant AND g.collection_id = c.id AND m.user_id = :user)
      )
      AND (
        CAST(:session AS uuid) IS NULL
        OR NOT EXISTS (
             SELECT 1 FROM session_collections s
             WHERE s.tenant_id = :tenant AND s.session_id = CAST(:session AS uuid))
        OR EXISTS (
             SELECT 1 FROM session_collections s
             WHERE s.tenant_id = :tenant AND s.session_id = CAST(:session AS uuid)
               AND s.collection_id = c.id)
      )
"""
_VISIBLE = text(_VISIBLE_SQL + "ORDER BY c.id")
# The same, and the transaction narrowed to them in the same round trip: the setting is
# computed where the rows are (an empty list narrows to nothing).
_NARROW = text(
    """
    WITH visible AS ({VISIBLE})
    SELECT set_config('threadline.collections',
                      '{' || coalesce(string_agg(id::text, ',' ORDER BY id), '') || '}',
                      true) AS setting,
           coalesce(array_agg(id ORDER BY id), '{}') AS ids
    FROM visible
    """.replace("{VISIBLE}", _VISIBLE_SQL)
).columns(column("setting", Text), column("ids", ARRAY(UUID(as_uuid=True))))

# Every tenant has one default collection, visible to all (migration 0031); a tenant made
# before it, or by a path that skipped it, gets it here.
_ENSURE_DEFAULT = text(
    "INSERT INTO kb_collections (tenant_id, id, name, is_default) "
    "VALUES (:tenant, gen_random_uuid(), 'General', true) ON CONFLICT DO NOTHING"
)

# An active collection of the tenant, for a caller that is not narrowed (the CLI's ingest).
_ACTIVE = text(
    "SELECT id FROM kb_collections WHERE tenant_id = :tenant AND id = :id AND status = 'active'"
)

_SESSION_SCOPE = text(
    "SELECT collection_id FROM session_collections "
    "WHERE tenant_id = :tenant AND session_id = :session ORDER BY collection_id"
)


async def visible_collection_ids(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    user_id: uuid.UUID,
    *,
    is_admin: bool | None = None,
    session_id: uuid.UUID | None = None,
) -> list[uuid.UUID]:
    """The active collections `user_id` may search now (admins: all of the tenant's), within
    `session_id`'s scope when it has one."""
    rows = await db.execute(
        _VISIBLE,
        {"tenant": tenant_id, "user": user_id, "admin": is_admin, "session": session_id},
    )
    return list(rows.scalars().all())


async def narrow_to_visible(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    user_id: uuid.UUID,
    *,
    is_admin: bool | None = None,
    session_id: uuid.UUID | None = None,
) -> list[uuid.UUID]:
    """`visible_collection_ids`, with `db` narrowed to them now and in its later
    transactions: one statement, not a read and a setting."""
    row = (
        await db.execute(
            _NARROW,
            {"tenant": tenant_id, "user": user_id, "admin": is_admin, "session": session_id},
        )
    ).one()
    db.info[COLLECTIONS] = row.setting  # what the statement set, for the next transactions
    return list(row.ids)


async def document_collections(
    db: AsyncSession, tenant_id: uuid.UUID, document_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, uuid.UUID]:
    """Which collection each of these existing documents is in, whoever may see it: ids
    only, never a title or a text. The one read that lifts the caller's narrowing (for this
    statement; the tenant's policy still holds), so a replay can tell a source the user lost
    from one that was deleted (ADR 0078)."""
    if not document_ids:
        return {}
    statement = select(KbDocument.id, KbDocument.collection_id).where(
        KbDocument.tenant_id == tenant_id, KbDocument.id.in_(list(document_ids))
    )
    narrowed = db.info.get(COLLECTIONS)
    if narrowed is None:  # nothing to lift (a replay's own transaction): one statement
        return dict((await db.execute(statement)).all())
    await restrict_to_collections(db, None)
    try:
        return dict((await db.execute(statement)).all())
    finally:
        await set_scope(db, {COLLECTIONS: narrowed})


async def is_active_collection(
    db: AsyncSession, tenant_id: uuid.UUID, collection_id: uuid.UUID
) -> bool:
    """Whether the tenant has this collection, and it is not being deleted."""
    found = await db.execute(_ACTIVE, {"tenant": tenant_id, "id": collection_id})
    return found.first() is not None


async def ensure_default_collection(db: AsyncSession, tenant_id: uuid.UUID) -> None:
    """Create the tenant's default collection if it has none."""
    await db.execute(_ENSURE_DEFAULT, {"tenant": tenant_id})


async def session_scope(
    db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID
) -> list[uuid.UUID]:
    """The collections a conversation is restricted to (empty: not restricted)."""
    rows = await db.execute(_SESSION_SCOPE, {"tenant": tenant_id, "session": session_id})
    return list(rows.scalars().all())


async def replace_session_scope(
    db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID, ids: Sequence[uuid.UUID]
) -> None:
    """Restrict a conversation to exactly these collections (empty: lift the restriction)."""
    await db.execute(
        delete(SessionCollection).where(
            SessionCollection.tenant_id == tenant_id, SessionCollection.session_id == session_id
        )
    )
    if ids:
        await db.execute(
            insert(SessionCollection),
            [
                {"tenant_id": tenant_id, "session_id": session_id, "collection_id": c}
                for c in dict.fromkeys(ids)
            ],
        )


async def record_change(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    actor_id: uuid.UUID,
    action: str,
    resource: str,
    before: object,
    after: object,
) -> None:
    """An audit-log entry of a change of who sees what: who, what, before, after."""
    db.add(
        AuditLog(
            tenant_id=tenant_id,
            actor_user_id=actor_id,
            action=action,
            resource=resource,
            details={"before": before, "after": after},
        )
    )
    await db.flush()


def as_strings(ids: Sequence[uuid.UUID]) -> list[str]:
    """Ids as JSON strings (a manifest, an audit entry)."""
    return [str(i) for i in ids]
