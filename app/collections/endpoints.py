"""/admin/collections: admins create, rename, re-scope and delete collections and move
documents between them; /collections: the ones the caller may search."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, status

from app.auth.principal import AdminPrincipal, CurrentPrincipal
from app.collections import service
from app.collections.schemas import (
    CollectionIn,
    CollectionList,
    CollectionOut,
    CollectionPatch,
    MoveDocumentIn,
    MoveDocumentOut,
    VisibleCollectionList,
)
from app.core.deps import DbSession
from app.core.errors import error_responses

router = APIRouter(tags=["collections"])


@router.get("/collections", response_model=VisibleCollectionList)
async def visible_collections(principal: CurrentPrincipal, db: DbSession) -> VisibleCollectionList:
    """The collections the caller may search now, by name (a new chat's scope picker)."""
    return await service.visible_to_caller(db, principal)


@router.get("/admin/collections", response_model=CollectionList)
async def list_collections(admin: AdminPrincipal, db: DbSession) -> CollectionList:
    """Every collection of the tenant: who may see it, its documents, bytes and chunks."""
    return await service.list_collections(db, admin)


@router.post(
    "/admin/collections",
    response_model=CollectionOut,
    status_code=status.HTTP_201_CREATED,
    responses=error_responses(404, 409),
)
async def create_collection(
    body: CollectionIn, admin: AdminPrincipal, db: DbSession
) -> CollectionOut:
    """A new collection, visible to the whole tenant or to the listed groups."""
    return await service.create_collection(db, admin, body)


@router.get(
    "/admin/collections/{collection_id}",
    response_model=CollectionOut,
    responses=error_responses(404),
)
async def get_collection(
    collection_id: uuid.UUID, admin: AdminPrincipal, db: DbSession
) -> CollectionOut:
    """One collection; while it is being deleted, how far the deletion has gone."""
    return await service.get_collection(db, admin, collection_id)


@router.patch(
    "/admin/collections/{collection_id}",
    response_model=CollectionOut,
    responses=error_responses(404, 409),
)
async def update_collection(
    collection_id: uuid.UUID, body: CollectionPatch, admin: AdminPrincipal, db: DbSession
) -> CollectionOut:
    """Rename or re-scope a collection: it applies to everyone's next request."""
    return await service.update_collection(db, admin, collection_id, body)


@router.delete(
    "/admin/collections/{collection_id}",
    response_model=CollectionOut,
    status_code=status.HTTP_202_ACCEPTED,
    responses=error_responses(404, 409),
)
async def delete_collection(
    collection_id: uuid.UUID, admin: AdminPrincipal, db: DbSession
) -> CollectionOut:
    """Delete a collection: hidden at once, its documents, chunks and vectors removed in
    the background (poll `GET` for the progress; 404 once it is gone)."""
    return await service.delete_collection(db, admin, collection_id)


@router.post(
    "/admin/collections/{collection_id}/documents",
    response_model=MoveDocumentOut,
    responses=error_responses(404, 409),
)
async def move_document(
    collection_id: uuid.UUID, body: MoveDocumentIn, admin: AdminPrincipal, db: DbSession
) -> MoveDocumentOut:
    """Move a knowledge-base document into this collection."""
    return await service.move_document(db, admin, collection_id, body)
