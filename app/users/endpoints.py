"""The admin's user management: the tenant's users listed, their role and status changed,
their password reset (issue 28). Creating users and API keys stays with `app.auth`; erasing a
user is the privacy domain's (`DELETE /admin/users/{id}`)."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query, Response

from app.auth.endpoints import no_store
from app.auth.principal import AdminPrincipal
from app.auth.schemas import AdminUser, AdminUserPage, PasswordReset, UpdateUserRequest
from app.core.deps import DbSession
from app.core.errors import error_responses
from app.core.json_types import NO_NUL
from app.core.pagination import TEXT_CURSOR_FORM, cursor_schema
from app.users import service

router = APIRouter(prefix="/admin", tags=["admin"])


@router.get("/users", response_model=AdminUserPage, responses=error_responses(400))
async def list_users(
    admin: AdminPrincipal,
    db: DbSession,
    q: Annotated[
        str | None, Query(max_length=254, pattern=NO_NUL, description="Part of the e-mail")
    ] = None,
    cursor: Annotated[
        str | None,
        Query(max_length=400, json_schema_extra=cursor_schema(TEXT_CURSOR_FORM, "opaque")),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> AdminUserPage:
    """The tenant's users by e-mail, with role, status, last sign-in and conversation count."""
    return await service.list_users(db, admin, query=q, cursor=cursor, limit=limit)


@router.get("/users/{user_id}", response_model=AdminUser, responses=error_responses(404))
async def get_user(user_id: uuid.UUID, admin: AdminPrincipal, db: DbSession) -> AdminUser:
    """One of the tenant's users (404 for a user of another tenant)."""
    return await service.get_user(db, admin, user_id)


@router.patch("/users/{user_id}", response_model=AdminUser, responses=error_responses(404, 409))
async def update_user(
    user_id: uuid.UUID, body: UpdateUserRequest, admin: AdminPrincipal, db: DbSession
) -> AdminUser:
    """Change a user's role, or disable (their tokens and keys stop at once) or enable them."""
    return await service.update_user(db, admin, user_id, body)


@router.post(
    "/users/{user_id}/password", response_model=PasswordReset, responses=error_responses(404)
)
async def reset_password(
    user_id: uuid.UUID, response: Response, admin: AdminPrincipal, db: DbSession
) -> PasswordReset:
    """A new temporary password for the user, shown only here; their logins are ended."""
    no_store(response)
    return await service.reset_password(db, admin, user_id)
