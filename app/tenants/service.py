"""Creating and finding tenants (used by the CLI and the demo)."""

from __future__ import annotations

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.db import new_id, scope_to_tenant
from app.core.errors import Conflict, NotFound, UnprocessableEntity
from app.models import Tenant
from app.tenants.repository import find_tenant_by_name, insert_tenant

MAX_NAME_LENGTH = 100


def normalise_name(name: str) -> str:
    cleaned = " ".join(name.split())
    if not cleaned or len(cleaned) > MAX_NAME_LENGTH:
        raise UnprocessableEntity(f"A tenant name has 1 to {MAX_NAME_LENGTH} characters.")
    return cleaned


async def create_tenant(db: AsyncSession, name: str) -> Tenant:
    name = normalise_name(name)
    if await find_tenant_by_name(db, name) is not None:
        raise Conflict(f"A tenant named {name!r} already exists.", code="tenant_exists")
    tenant = Tenant(id=new_id(), name=name, settings={})
    await scope_to_tenant(db, tenant.id)  # outside the savepoint: it must outlive it
    try:
        async with db.begin_nested():
            return await insert_tenant(db, tenant)
    except IntegrityError as exc:  # a concurrent create won the race
        raise Conflict(f"A tenant named {name!r} already exists.", code="tenant_exists") from exc


async def require_tenant(db: AsyncSession, name: str) -> Tenant:
    tenant = await find_tenant_by_name(db, normalise_name(name))
    if tenant is None:
        raise NotFound(f"No tenant named {name!r}.", code="tenant_not_found")
    return tenant
