from __future__ import annotations

from app.core.pagination import Cursor
from app.core.repository import TenantRepository
from app.models import KbDocument


class DocumentRepository(TenantRepository[KbDocument]):
    model = KbDocument

    async def by_hash(self, content_hash: str) -> KbDocument | None:
        result = await self.session.execute(
            self.scoped().where(KbDocument.content_hash == content_hash)
        )
        return result.scalar_one_or_none()

    async def page(self, *, limit: int, after: Cursor | None) -> list[KbDocument]:
        return await self.keyset_page(self.scoped(), limit=limit, after=after)
