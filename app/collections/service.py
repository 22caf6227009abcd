"""Collections: admins create, rename, re-scope and delete them and move documents between
them; every user lists the ones they may search. Never commits; each change is audited with
who, what, before and after (issue 30, items 2 and 8)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from pydantic import JsonValue
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.principal import Principal
from app.collections.jobs import delete_collection_job
from app.collections.repository import CollectionRepository, CollectionStats
from app.collections.schemas import (
    CollectionIn,
    CollectionList,
    CollectionOut,
    CollectionPatch,
    MoveDocumentIn,
    MoveDocumentOut,
    VisibleCollection,
    VisibleCollectionList,
)
from app.core.db import visible_collections
from app.core.errors import Conflict, NotFound
from app.core.jobs import enqueue_after_commit
from app.core.json_types import JsonObject
from app.groups.repository import GroupRepository
from app.groups.service import audit
from app.models import KbCollection


def _out(
    c: KbCollection, groups: Sequence[uuid.UUID], stats: CollectionStats | None
) -> CollectionOut:
    stats = stats or CollectionStats()
    return CollectionOut(
        id=c.id,
        name=c.name,
        visibility="groups" if c.visibility == "groups" else "tenant",
        group_ids=list(groups),
        is_default=c.is_default,
        status="deleting" if c.status == "deleting" else "active",
        deletion_progress=c.deletion_progress,
        documents=stats.documents,
        size_bytes=stats.size_bytes,
        chunks=stats.chunks,
        created_at=c.created_at,
    )


def _state(c: KbCollection, groups: Sequence[uuid.UUID]) -> JsonObject:
    """What the audit records of a collection's scope."""
    group_ids: list[JsonValue] = [str(g) for g in sorted(groups, key=str)]
    return {"name": c.name, "visibility": c.visibility, "group_ids": group_ids}


async def _collection(db: AsyncSession, admin: Principal, collection_id: uuid.UUID) -> KbCollection:
    found = await CollectionRepository(db, admin.tenant_id).get(collection_id)
    if found is None:
        raise NotFound("No such collection.", code="collection_not_found")
    return found


async def _check_groups(db: AsyncSession, admin: Principal, group_ids: Sequence[uuid.UUID]) -> None:
    found = {g.id for g in await GroupRepository(db, admin.tenant_id).by_ids(group_ids)}
    missing = [str(g) for g in group_ids if g not in found]
    if missing:
        raise NotFound(f"No such group: {', '.join(sorted(set(missing)))}.", code="group_not_found")


async def list_collections(db: AsyncSession, admin: Principal) -> CollectionList:
    """Every collection of the tenant with its groups, document count, bytes and chunks."""
    collections = CollectionRepository(db, admin.tenant_id)
    await collections.ensure_default()
    rows = await collections.all()
    groups = await collections.group_ids([c.id for c in rows])
    stats = await collections.stats()
    return CollectionList(items=[_out(c, groups.get(c.id, []), stats.get(c.id)) for c in rows])


async def get_collection(
    db: AsyncSession, admin: Principal, collection_id: uuid.UUID
) -> CollectionOut:
    """One collection (its deletion's progress while it is being deleted)."""
    collections = CollectionRepository(db, admin.tenant_id)
    found = await _collection(db, admin, collection_id)
    groups = await collections.group_ids([found.id])
    stats = await collections.stats()
    return _out(found, groups.get(found.id, []), stats.get(found.id))


async def create_collection(
    db: AsyncSession, admin: Principal, body: CollectionIn
) -> CollectionOut:
    """A new, empty collection (409 when the name is taken, 404 for an unknown group)."""
    collections = CollectionRepository(db, admin.tenant_id)
    await collections.ensure_default()  # the tenant's first collection is never its only one
    if await collections.by_name(body.name) is not None:
        raise Conflict("A collection of this name exists.", code="collection_exists")
    await _check_groups(db, admin, body.group_ids)
    created = collections.add(
        KbCollection(tenant_id=admin.tenant_id, name=body.name, visibility=body.visibility)
    )
    await db.flush()
    await db.refresh(created)
    await collections.set_groups(created.id, body.group_ids)
    await audit(
        db,
        admin.tenant_id,
        admin.user_id,
        "collection.create",
        f"collection:{created.id}",
        after=_state(created, body.group_ids),
    )
    return _out(created, list(dict.fromkeys(body.group_ids)), None)


async def update_collection(
    db: AsyncSession, admin: Principal, collection_id: uuid.UUID, body: CollectionPatch
) -> CollectionOut:
    """Rename or re-scope a collection; who may see it changes at everyone's next request."""
    collections = CollectionRepository(db, admin.tenant_id)
    found = await _collection(db, admin, collection_id)
    if found.status != "active":
        raise Conflict("The collection is being deleted.", code="collection_deleting")
    groups_before = (await collections.group_ids([found.id])).get(found.id, [])
    before = _state(found, groups_before)
    if body.name is not None and body.name != found.name:
        if await collections.by_name(body.name) is not None:
            raise Conflict("A collection of this name exists.", code="collection_exists")
        found.name = body.name
    if body.visibility is not None:
        found.visibility = body.visibility
    groups_after = groups_before
    if body.group_ids is not None:
        await _check_groups(db, admin, body.group_ids)
        await collections.set_groups(found.id, body.group_ids)
        groups_after = list(dict.fromkeys(body.group_ids))
    await db.flush()
    after = _state(found, groups_after)
    if after != before:
        await audit(
            db,
            admin.tenant_id,
            admin.user_id,
            "collection.update",
            f"collection:{found.id}",
            before=before,
            after=after,
        )
    return await get_collection(db, admin, collection_id)


async def delete_collection(
    db: AsyncSession, admin: Principal, collection_id: uuid.UUID
) -> CollectionOut:
    """Start deleting a collection: hidden from every request at once, its documents removed
    in the background (progress on `GET`). The default collection is kept (409)."""
    found = await _collection(db, admin, collection_id)
    if found.is_default:
        raise Conflict("The default collection cannot be deleted.", code="default_collection")
    groups = (await CollectionRepository(db, admin.tenant_id).group_ids([found.id])).get(
        found.id, []
    )
    if found.status != "deleting":
        before = _state(found, groups)
        found.status = "deleting"
        await db.flush()
        await audit(
            db,
            admin.tenant_id,
            admin.user_id,
            "collection.delete",
            f"collection:{found.id}",
            before=before,
            after=None,
        )
    # Enqueued again on a repeated DELETE: a job lost with its process resumes.
    enqueue_after_commit(db, delete_collection_job(admin.tenant_id, found.id))
    return _out(found, groups, None)


async def move_document(
    db: AsyncSession, admin: Principal, collection_id: uuid.UUID, body: MoveDocumentIn
) -> MoveDocumentOut:
    """Move a document into this collection (its chunks follow in the same transaction)."""
    target = await _collection(db, admin, collection_id)
    if target.status != "active":
        raise Conflict("The collection is being deleted.", code="collection_deleting")
    before = await CollectionRepository(db, admin.tenant_id).move_document(
        body.document_id, target.id
    )
    if before is None:
        raise NotFound("No such document.", code="document_not_found")
    if before != target.id:
        await audit(
            db,
            admin.tenant_id,
            admin.user_id,
            "collection.document_move",
            f"document:{body.document_id}",
            before=str(before),
            after=str(target.id),
        )
    return MoveDocumentOut(
        document_id=body.document_id, from_collection_id=before, collection_id=target.id
    )


async def visible_to_caller(db: AsyncSession, principal: Principal) -> VisibleCollectionList:
    """The collections the caller may search now (the request is narrowed to them)."""
    collections = CollectionRepository(db, principal.tenant_id)
    ids = visible_collections(db) or []
    rows = await collections.all(ids)
    stats = await collections.stats()
    return VisibleCollectionList(
        items=[
            VisibleCollection(
                id=c.id, name=c.name, documents=stats.get(c.id, CollectionStats()).documents
            )
            for c in rows
        ]
    )
