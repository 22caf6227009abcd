from __future__ import annotations

from typing import Any

from sqlalchemy.dialects.postgresql import insert

from app.core.pagination import Cursor
from app.core.repository import TenantRepository
from app.models import KbDocument


class DocumentRepository(TenantRepository[KbDocument]):
    """The tenant's knowledge-base documents."""

    model = KbDocument

    async def by_hash(self, content_hash: str) -> KbDocument | None:
        """The tenant's document with this content hash, or None."""
        result = await self.db.execute(self.scoped().where(KbDocument.content_hash == content_hash))
        return result.scalar_one_or_none()

    async def insert_new(self, **values: Any) -> KbDocument | None:
        """The new document, or None when this tenant already has one with the same content
        (one statement: no lookup first, no savepoint for a concurrent upload of the file)."""
        statement = (
            insert(KbDocument)
            .values(tenant_id=self.tenant_id, **values)
            .on_conflict_do_nothing(index_elements=["tenant_id", "content_hash"])
            .returning(KbDocument)
        )
        return (await self.db.scalars(statement)).one_or_none()

    async def page(self, *, limit: int, after: Cursor | None) -> list[KbDocument]:
        """One page of the tenant's documents, keyset-paginated."""
        return await self.keyset_page(self.scoped(), limit=limit, after=after)
