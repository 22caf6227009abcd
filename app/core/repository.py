"""Repository base: every statement starts from a select already scoped to the tenant."""

from __future__ import annotations

import uuid
from typing import Any, ClassVar, Generic, TypeVar

from sqlalchemy import Select, select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.db import TenantOwned
from app.core.pagination import Cursor

M = TypeVar("M", bound=TenantOwned)


def containing(text: str) -> str:
    """A LIKE pattern for the strings that contain `text` literally: its backslashes, `%`
    and `_` escaped by a backslash (the escape character the queries name)."""
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


class TenantRepository(Generic[M]):
    """SQL for one tenant-owned model. Subclasses build on `scoped()`, never on `select()`.

    Row-level security enforces the same rule in the database; this keeps the application
    honest on its own and lets the planner use the `(tenant_id, ...)` indexes.
    """

    model: ClassVar[type[Any]]

    def __init__(self, db: AsyncSession, tenant_id: uuid.UUID) -> None:
        self.db = db
        self.tenant_id = tenant_id

    def scoped(self) -> Select[M]:
        """A select of this repository's model, already filtered to its tenant."""
        statement: Select[M] = select(self.model).where(self.model.tenant_id == self.tenant_id)
        return statement

    async def get(self, object_id: uuid.UUID) -> M | None:
        """The tenant's row with this id, or None."""
        result = await self.db.execute(self.scoped().where(self.model.id == object_id))
        return result.scalar_one_or_none()

    def add(self, obj: M) -> M:
        """Add a new row to the database session, stamped with (and checked against) the tenant."""
        if obj.tenant_id is None:
            obj.tenant_id = self.tenant_id
        elif obj.tenant_id != self.tenant_id:
            raise ValueError("object belongs to another tenant")
        self.db.add(obj)
        return obj

    async def delete(self, obj: M) -> None:
        """Mark a row for deletion in the database session."""
        await self.db.delete(obj)

    async def keyset_page(
        self, statement: Select[M], *, limit: int, after: Cursor | None
    ) -> list[M]:
        """Newest first by `(created_at, id)`; fetches one extra row to tell if more exist."""
        created_at = self.model.created_at
        if after is not None:
            statement = statement.where(
                tuple_(created_at, self.model.id) < tuple_(after.created_at, after.id)
            )
        statement = statement.order_by(created_at.desc(), self.model.id.desc()).limit(limit + 1)
        result = await self.db.execute(statement)
        return list(result.scalars())
