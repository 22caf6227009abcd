from __future__ import annotations

import re
import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.core.json_types import NO_NUL

Role = Literal["member", "admin"]

# One `@`, a dot in the domain, no spaces or control characters; surrounding spaces are
# trimmed. The OpenAPI pattern and the check are the same rule.
_ADDRESS = r"[^@\s\x00-\x1f]+@[^@\s\x00-\x1f]+\.[^@\s\x00-\x1f]+"
EMAIL_PATTERN = rf"^\s*{_ADDRESS}\s*$"
_EMAIL = re.compile(_ADDRESS)
# At least eight characters besides surrounding spaces (THREADLINE_PASSWORD_MIN_LENGTH may
# ask for more).
NEW_PASSWORD_PATTERN = r"\S[\s\S]{6,}\S"


def normalise_email(value: str) -> str:
    """Validator: the e-mail trimmed and lower-cased, or a ValueError if it is no address."""
    value = value.strip().lower()
    if not _EMAIL.fullmatch(value):
        raise ValueError("not a valid e-mail address")
    return value


class LoginRequest(BaseModel):
    """Credentials for a password login."""

    model_config = ConfigDict(extra="forbid")

    email: str = Field(max_length=254, pattern=EMAIL_PATTERN)
    password: str = Field(min_length=1, max_length=1024)
    tenant: str | None = Field(
        default=None,
        max_length=100,
        description="Tenant name or id; needed only when the e-mail exists in several tenants.",
    )

    _email = field_validator("email")(normalise_email)


class RefreshRequest(BaseModel):
    """A refresh token to exchange for a new token pair."""

    model_config = ConfigDict(extra="forbid")

    refresh_token: str = Field(min_length=1, max_length=4096)


class TokenResponse(BaseModel):
    """A new access and refresh token pair."""

    access_token: str
    refresh_token: str
    token_type: Literal["bearer"] = "bearer"
    expires_in: int


class BrowserToken(BaseModel):
    """What a browser login or refresh gives the page: the access token, kept in memory."""

    access_token: str
    token_type: Literal["bearer"] = "bearer"
    expires_in: int


class MeResponse(BaseModel):
    """The signed-in user, as the caller sees themselves."""

    id: uuid.UUID
    email: str
    tenant_id: uuid.UUID
    role: Role


class CreateUserRequest(BaseModel):
    """An admin's request to add a user to their tenant."""

    model_config = ConfigDict(extra="forbid")

    email: str = Field(max_length=254, pattern=EMAIL_PATTERN)
    # Documented here, enforced by the service (422 `weak_password`, with the configured length).
    password: str = Field(
        max_length=1024,
        json_schema_extra={"minLength": 8, "pattern": NEW_PASSWORD_PATTERN},
    )
    role: Role = "member"

    _email = field_validator("email")(normalise_email)


class UserResponse(BaseModel):
    """A user of the tenant."""

    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    email: str
    tenant_id: uuid.UUID
    role: Role
    created_at: datetime


class CreateApiKeyRequest(BaseModel):
    """An admin's request for a new API key with a name and a role."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100, pattern=NO_NUL)
    role: Role = "member"


class ApiKeyCreated(BaseModel):
    """A newly created API key, the only time its secret is returned."""

    id: uuid.UUID
    key: str = Field(description="Shown once; only its hash is stored.")
    name: str
    role: Role
    prefix: str


class ApiKeyInfo(BaseModel):
    """An API key as listed: its name, role and prefix, never the secret."""

    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    name: str
    role: Role
    prefix: str = Field(validation_alias="key_prefix")
    created_at: datetime
    revoked_at: datetime | None


class AdminUser(BaseModel):
    """A user of the tenant as the admin's user list shows them."""

    id: uuid.UUID
    email: str
    role: Role
    status: Literal["active", "disabled"]
    created_at: datetime
    last_login_at: datetime | None
    disabled_at: datetime | None
    conversations: int


class AdminUserPage(BaseModel):
    """A page of the tenant's users by e-mail; `next_cursor` fetches the next."""

    items: list[AdminUser]
    next_cursor: str | None


class UpdateUserRequest(BaseModel):
    """An admin's change to a user: a new role, disabled or enabled again (either or both)."""

    model_config = ConfigDict(extra="forbid")

    role: Role | None = None
    disabled: bool | None = None


class PasswordReset(BaseModel):
    """A new temporary password for a user, shown once, to hand to them."""

    user: AdminUser
    temporary_password: str = Field(description="Shown only here; the user's logins are ended.")
