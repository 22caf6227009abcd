from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Role = Literal["member", "admin"]


def normalise_email(value: str) -> str:
    value = value.strip().lower()
    if any(ord(ch) < 32 for ch in value):
        raise ValueError("control characters are not allowed")
    local, _, domain = value.partition("@")
    if not local or "." not in domain or " " in value or len(value) > 254:
        raise ValueError("not a valid e-mail address")
    return value


class LoginRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    email: str = Field(max_length=254)
    password: str = Field(min_length=1, max_length=1024)
    tenant: str | None = Field(
        default=None,
        max_length=100,
        description="Tenant name or id; needed only when the e-mail exists in several tenants.",
    )

    _email = field_validator("email")(normalise_email)


class RefreshRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    refresh_token: str = Field(min_length=1, max_length=4096)


class TokenResponse(BaseModel):
    access_token: str
    refresh_token: str
    token_type: Literal["bearer"] = "bearer"
    expires_in: int


class MeResponse(BaseModel):
    id: uuid.UUID
    email: str
    tenant_id: uuid.UUID
    role: Role


class CreateUserRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    email: str = Field(max_length=254)
    password: str = Field(max_length=1024)
    role: Role = "member"

    _email = field_validator("email")(normalise_email)


class UserResponse(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    email: str
    tenant_id: uuid.UUID
    role: Role
    created_at: datetime


class CreateApiKeyRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100)
    role: Role = "member"


class ApiKeyCreated(BaseModel):
    id: uuid.UUID
    key: str = Field(description="Shown once; only its hash is stored.")
    name: str
    role: Role
    prefix: str


class ApiKeyInfo(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    name: str
    role: Role
    prefix: str = Field(validation_alias="key_prefix")
    created_at: datetime
    revoked_at: datetime | None
