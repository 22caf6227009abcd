"""SQL of the admin's document view: a document's chunks in reading order, by keyset, and
its status history, newest first."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import KbChunk, KbDocument, KbDocumentEvent


class DocumentChunks:
    """The chunks of the tenant's documents."""

    def __init__(self, db: AsyncSession, tenant_id: uuid.UUID) -> None:
        self.db = db
        self.tenant_id = tenant_id

    async def document(self, document_id: uuid.UUID) -> KbDocument | None:
        """The tenant's document, or None (another tenant's is none)."""
        statement = select(KbDocument).where(
            KbDocument.tenant_id == self.tenant_id, KbDocument.id == document_id
        )
        return (await self.db.execute(statement)).scalar_one_or_none()

    async def page(self, document_id: uuid.UUID, *, after: int | None, limit: int) -> list[KbChunk]:
        """Up to `limit + 1` chunks after ordinal `after`, in reading order."""
        statement = select(KbChunk).where(
            KbChunk.tenant_id == self.tenant_id, KbChunk.document_id == document_id
        )
        if after is not None:
            statement = statement.where(KbChunk.ordinal > after)
        statement = statement.order_by(KbChunk.ordinal).limit(limit + 1)
        return list((await self.db.execute(statement)).scalars())

    async def events(self, document_id: uuid.UUID, limit: int) -> list[KbDocumentEvent]:
        """The document's latest `limit` status events, newest first (the id breaks a tie
        of times, which clock_timestamp() makes unlikely)."""
        statement = (
            select(KbDocumentEvent)
            .where(
                KbDocumentEvent.tenant_id == self.tenant_id,
                KbDocumentEvent.document_id == document_id,
            )
            .order_by(KbDocumentEvent.created_at.desc(), KbDocumentEvent.id.desc())
            .limit(limit)
        )
        return list((await self.db.execute(statement)).scalars())
