"""Whether a tenant's knowledge base has anything to search, cached briefly per process.

Asked on every turn (classify), it would otherwise cost a transaction each time. A positive
answer is kept a minute; a negative one only a few seconds, so a tenant's first document is
used almost at once. Ingestion calls `invalidate` when a document becomes ready.
"""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.db import COLLECTIONS
from app.core.tenant_cache import TenantCache
from app.retrieval.repository import has_ready_documents

POSITIVE_TTL_SECONDS = 60.0
NEGATIVE_TTL_SECONDS = 5.0


MAX_NARROWINGS = 1024
"""Distinct sets of visible collections remembered at most (then forgotten all at once)."""


class KnowledgeBaseStatus:
    """Whether each tenant's knowledge base has ready documents, cached per process, per set
    of collections the asking transaction may see (ADR 0078): the answer for a user whose
    scope holds nothing is never another user's."""

    def __init__(self) -> None:
        self._known: dict[str, TenantCache[bool]] = {}

    async def has_documents(self, db: AsyncSession, tenant_id: uuid.UUID) -> bool:
        """Whether the tenant has a ready document `db` may see, from the cache or one
        query."""
        narrowing = str(db.info.get(COLLECTIONS) or "")
        known = self._known.get(narrowing)
        if known is None:
            if len(self._known) >= MAX_NARROWINGS:
                self._known.clear()
            known = self._known[narrowing] = TenantCache()
        cached = known.get(tenant_id)
        if cached is not None:
            return cached
        found = await has_ready_documents(db, tenant_id)
        ttl = POSITIVE_TTL_SECONDS if found else NEGATIVE_TTL_SECONDS
        return known.put(tenant_id, found, ttl)

    def invalidate(self, tenant_id: uuid.UUID) -> None:
        """Forget the tenant's answers, so a new document is seen at once."""
        for known in self._known.values():
            known.invalidate(tenant_id)
