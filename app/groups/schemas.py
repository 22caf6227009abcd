"""The shapes of `/admin/groups`."""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.core.json_types import NOT_BLANK

NAME_MAX = 200


def clean_name(value: str) -> str:
    """A name with its white space collapsed (blank is refused by the pattern)."""
    return " ".join(value.split())


class GroupIn(BaseModel):
    """A new group, or a group's new name."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=NAME_MAX, pattern=NOT_BLANK)

    _name = field_validator("name")(clean_name)


class GroupOut(BaseModel):
    """A group of the tenant."""

    id: uuid.UUID
    name: str
    members: int
    created_at: datetime


class GroupList(BaseModel):
    """Every group of the tenant, by name."""

    items: list[GroupOut]


class MemberOut(BaseModel):
    """A member of a group."""

    user_id: uuid.UUID
    email: str


class GroupDetail(GroupOut):
    """A group with its members."""

    member_list: list[MemberOut]


class MemberById(BaseModel):
    """A member to add, by user id."""

    model_config = ConfigDict(extra="forbid")

    user_id: uuid.UUID


class MemberByEmail(BaseModel):
    """A member to add, by e-mail."""

    model_config = ConfigDict(extra="forbid")

    email: str = Field(min_length=3, max_length=254, pattern=NOT_BLANK)


MemberIn = MemberById | MemberByEmail
"""A member to add: by user id or by e-mail."""
