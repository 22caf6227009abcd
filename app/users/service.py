"""An admin runs their tenant's users: the list, role changes, disabling and enabling,
password resets. Erasure is the privacy domain's (`DELETE /admin/users/{id}`). Never commits.

Every change is recorded in the audit log. An admin cannot demote or disable themselves (a
tenant must not lock out its last admin by a slip); disabling and a password reset end the
user's logins, and while disabled every credential of the user is refused (`principal.py`).
"""

from __future__ import annotations

import base64
import re
import secrets
import uuid
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession

from app.audit.log import record
from app.auth.passwords import hash_password
from app.auth.principal import Principal
from app.auth.repository import RefreshFamilyRepository, UserRepository
from app.auth.schemas import AdminUser, AdminUserPage, PasswordReset, UpdateUserRequest
from app.core.errors import BadRequest, Conflict, NotFound
from app.core.pagination import TEXT_CURSOR_FORM
from app.models import User


def _view(user: User, conversations: int) -> AdminUser:
    return AdminUser(
        id=user.id,
        email=user.email,
        role=user.role,  # the CHECK constraint keeps it a Role
        status="disabled" if user.disabled_at is not None else "active",
        created_at=user.created_at,
        last_login_at=user.last_login_at,
        disabled_at=user.disabled_at,
        conversations=conversations,
    )


def _cursor(email: str) -> str:
    return base64.urlsafe_b64encode(email.encode()).decode().rstrip("=")


_TEXT_CURSOR = re.compile(TEXT_CURSOR_FORM)


def _after(cursor: str) -> str:
    """The e-mail a cursor of `TEXT_CURSOR_FORM` names; any such cursor is a position
    (bytes that are not UTF-8 or hold NUL, which no e-mail has, are still an ordering point),
    anything else 400 `invalid_cursor`."""
    if not _TEXT_CURSOR.fullmatch(cursor):
        raise BadRequest("The cursor is not valid.", code="invalid_cursor")
    raw = base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True)
    return raw.decode(errors="replace").replace("\x00", "")


async def list_users(
    db: AsyncSession, admin: Principal, *, query: str | None, cursor: str | None, limit: int
) -> AdminUserPage:
    """The tenant's users by e-mail, those whose e-mail contains `query` when given."""
    rows = await UserRepository(db, admin.tenant_id).page(
        contains=(query or "").strip().lower() or None,
        after_email=_after(cursor) if cursor else None,
        limit=limit + 1,
    )
    more = len(rows) > limit
    rows = rows[:limit]
    return AdminUserPage(
        items=[_view(user, count) for user, count in rows],
        next_cursor=_cursor(rows[-1][0].email) if more else None,
    )


async def _get(db: AsyncSession, admin: Principal, user_id: uuid.UUID) -> tuple[User, int]:
    found = await UserRepository(db, admin.tenant_id).with_conversations(user_id)
    if found is None:
        raise NotFound("No such user.", code="user_not_found")
    return found


async def get_user(db: AsyncSession, admin: Principal, user_id: uuid.UUID) -> AdminUser:
    """One of the tenant's users (404 for anyone else)."""
    return _view(*await _get(db, admin, user_id))


async def update_user(
    db: AsyncSession, admin: Principal, user_id: uuid.UUID, change: UpdateUserRequest
) -> AdminUser:
    """Change a user's role, disable or enable them (404 outside the tenant; 409 on oneself)."""
    user, conversations = await _get(db, admin, user_id)
    if user.id == admin.user_id and (change.role == "member" or change.disabled):
        raise Conflict(
            "You cannot demote or disable your own account; ask another admin.",
            code="own_account",
        )
    if change.role is not None and change.role != user.role:
        await record(
            db,
            admin,
            "user.role_changed",
            target_user_id=user.id,
            details={"from": user.role, "to": change.role},
        )
        user.role = change.role
    if change.disabled is not None and change.disabled != (user.disabled_at is not None):
        user.disabled_at = datetime.now(UTC) if change.disabled else None
        if change.disabled:
            await RefreshFamilyRepository(db, admin.tenant_id).revoke_user(user.id)
        action = "user.disabled" if change.disabled else "user.enabled"
        await record(db, admin, action, target_user_id=user.id)
    await db.flush()
    return _view(user, conversations)


async def reset_password(db: AsyncSession, admin: Principal, user_id: uuid.UUID) -> PasswordReset:
    """A new random password for the user, returned once; their logins end."""
    user, conversations = await _get(db, admin, user_id)
    temporary = secrets.token_urlsafe(12)
    user.password_hash = await hash_password(temporary)
    await RefreshFamilyRepository(db, admin.tenant_id).revoke_user(user.id)
    await record(db, admin, "user.password_reset", target_user_id=user.id)
    await db.flush()
    return PasswordReset(user=_view(user, conversations), temporary_password=temporary)
