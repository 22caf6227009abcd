"""/admin/groups: a tenant's admins create, rename and delete groups and manage members."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Response, status

from app.auth.principal import AdminPrincipal
from app.core.deps import DbSession
from app.core.errors import error_responses
from app.groups import service
from app.groups.schemas import GroupDetail, GroupIn, GroupList, MemberIn

router = APIRouter(prefix="/admin/groups", tags=["admin"])


@router.get("", response_model=GroupList)
async def list_groups(admin: AdminPrincipal, db: DbSession) -> GroupList:
    """Every group of the tenant, by name, with its member count."""
    return await service.list_groups(db, admin)


@router.post(
    "",
    response_model=GroupDetail,
    status_code=status.HTTP_201_CREATED,
    responses=error_responses(409),
)
async def create_group(body: GroupIn, admin: AdminPrincipal, db: DbSession) -> GroupDetail:
    """A new group (409 `group_exists` when the name is taken)."""
    return await service.create_group(db, admin, body)


@router.get("/{group_id}", response_model=GroupDetail, responses=error_responses(404))
async def get_group(group_id: uuid.UUID, admin: AdminPrincipal, db: DbSession) -> GroupDetail:
    """One group with its members."""
    return await service.get_group(db, admin, group_id)


@router.patch("/{group_id}", response_model=GroupDetail, responses=error_responses(404, 409))
async def rename_group(
    group_id: uuid.UUID, body: GroupIn, admin: AdminPrincipal, db: DbSession
) -> GroupDetail:
    """Rename a group."""
    return await service.rename_group(db, admin, group_id, body)


@router.delete(
    "/{group_id}", status_code=status.HTTP_204_NO_CONTENT, responses=error_responses(404)
)
async def delete_group(group_id: uuid.UUID, admin: AdminPrincipal, db: DbSession) -> Response:
    """Delete a group; its members lose what it let them see at their next request."""
    await service.delete_group(db, admin, group_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/{group_id}/members",
    response_model=GroupDetail,
    status_code=status.HTTP_201_CREATED,
    responses={
        **error_responses(404),
        200: {"model": GroupDetail, "description": "Already a member"},
    },
)
async def add_member(
    group_id: uuid.UUID, body: MemberIn, admin: AdminPrincipal, db: DbSession, response: Response
) -> GroupDetail:
    """Add a user to the group, by `user_id` or `email` (200 when already a member)."""
    detail, added = await service.add_member(db, admin, group_id, body)
    if not added:
        response.status_code = status.HTTP_200_OK
    return detail


@router.delete(
    "/{group_id}/members/{user_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=error_responses(404),
)
async def remove_member(
    group_id: uuid.UUID, user_id: uuid.UUID, admin: AdminPrincipal, db: DbSession
) -> Response:
    """Remove a user from the group; it applies to their next request."""
    await service.remove_member(db, admin, group_id, user_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
