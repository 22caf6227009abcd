"""Tenant admins read and set their tenant's retention policy."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.auth.principal import AdminPrincipal
from app.core.deps import DbSession
from app.core.json_types import json_number
from app.retention.policy import change_policy, get_policy

router = APIRouter(prefix="/admin/retention", tags=["admin"])


class RetentionPolicy(BaseModel):
    """A tenant's retention policy as the API shows and takes it."""

    model_config = ConfigDict(extra="forbid")

    max_turn_age_days: int | None = Field(
        default=None,
        ge=1,
        le=36500,
        description="Turns older than this many days are purged by the sweep; null: kept.",
    )

    _number = field_validator("max_turn_age_days", mode="before")(json_number)


@router.get("", response_model=RetentionPolicy)
async def read_policy(admin: AdminPrincipal, db: DbSession) -> RetentionPolicy:
    """The tenant's retention policy (admins only)."""
    return RetentionPolicy(max_turn_age_days=await get_policy(db, admin.tenant_id))


@router.put("", response_model=RetentionPolicy)
async def write_policy(
    body: RetentionPolicy, admin: AdminPrincipal, db: DbSession
) -> RetentionPolicy:
    """Set (or clear, with null) the tenant's maximum turn age."""
    await change_policy(db, admin, body.max_turn_age_days)
    return body
