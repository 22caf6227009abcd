"""Whether a tenant's knowledge base has anything to search, cached briefly per process.

Asked on every turn (classify), it would otherwise cost a transaction each time. A positive
answer is kept a minute; a negative one only a few seconds, so a tenant's first document is
used almost at once. Ingestion calls `invalidate` when a document becomes ready.
"""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.tenant_cache import TenantCache
from app.retrieval.repository import has_ready_documents

POSITIVE_TTL_SECONDS = 60.0
NEGATIVE_TTL_SECONDS = 5.0


class KnowledgeBaseStatus:
    """Whether each tenant's knowledge base has ready documents, cached per process."""

    def __init__(self) -> None:
        self._known: TenantCache[bool] = TenantCache()

    async def has_documents(self, db: AsyncSession, tenant_id: uuid.UUID) -> bool:
        """Whether the tenant has a ready document, from the cache or one query."""
        cached = self._known.get(tenant_id)
        if cached is not None:
            return cached
        found = await has_ready_documents(db, tenant_id)
        ttl = POSITIVE_TTL_SECONDS if found else NEGATIVE_TTL_SECONDS
        return self._known.put(tenant_id, found, ttl)

    def invalidate(self, tenant_id: uuid.UUID) -> None:
        """Forget the tenant's answer, so a new document is seen at once."""
        self._known.invalidate(tenant_id)
