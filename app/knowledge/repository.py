from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, literal, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm.attributes import set_committed_value

from app.core.downloads import StoredFile
from app.core.pagination import Cursor
from app.core.repository import TenantRepository
from app.ingestion.repository import with_events
from app.models import KbChunk, KbDocument


def _added(row: Any) -> Any:
    return literal("added")


def _uploaded_again(row: Any) -> Any:
    return literal("uploaded again after failing")


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
        write = (
            insert(KbDocument)
            .values(tenant_id=self.tenant_id, **values)
            .on_conflict_do_nothing(index_elements=["tenant_id", "content_hash"])
        )
        # Its first event in the same statement: the CTE returns the new row but its file
        # (deferred: the upload's bytes are not sent back, nor held by the CTE).
        names = [column.key for column in KbDocument.__table__.c if column.key != "source"]
        added = with_events(write, _added, names)
        statement = select(KbDocument).from_statement(added)
        return (await self.db.scalars(statement)).one_or_none()

    async def requeue_failed(self, document: KbDocument) -> None:
        """Queue a failed document again (uploaded again: try again), with its event."""
        write = (
            update(KbDocument)
            .where(
                KbDocument.tenant_id == self.tenant_id,
                KbDocument.id == document.id,
                KbDocument.status == "failed",
            )
            .values(status="pending", error=None, progress=0.0)
        )
        statement = with_events(write, _uploaded_again, ("id",))
        written = await self.db.scalar(statement.execution_options(synchronize_session=False))
        if written is None:  # no longer failed: another upload queued it first
            return
        for name, value in (("status", "pending"), ("error", None), ("progress", 0.0)):
            set_committed_value(document, name, value)

    async def original(self, doc_id: uuid.UUID, *, ready_only: bool) -> StoredFile | None:
        """The document's stored file, name and type (`ready_only`: None unless it is ready,
        the documents a member may search)."""
        statement = select(
            KbDocument.source, KbDocument.filename, KbDocument.title, KbDocument.content_type
        ).where(KbDocument.tenant_id == self.tenant_id, KbDocument.id == doc_id)
        if ready_only:
            statement = statement.where(KbDocument.status == "ready")
        row = (await self.db.execute(statement)).one_or_none()
        if row is None or row.source is None:
            return None
        return StoredFile(row.source, row.filename or row.title, row.content_type)

    async def page(self, *, limit: int, after: Cursor | None) -> list[KbDocument]:
        """One page of the tenant's documents, keyset-paginated."""
        return await self.keyset_page(self.scoped(), limit=limit, after=after)

    async def ready_count(self) -> int:
        """How many of the tenant's documents are ready (searchable)."""
        statement = select(func.count()).where(
            KbDocument.tenant_id == self.tenant_id, KbDocument.status == "ready"
        )
        return int((await self.db.execute(statement)).scalar_one())

    async def ready_titles(self, limit: int) -> list[tuple[uuid.UUID, str]]:
        """The newest `limit` ready documents' ids and titles."""
        statement = (
            select(KbDocument.id, KbDocument.title)
            .where(KbDocument.tenant_id == self.tenant_id, KbDocument.status == "ready")
            .order_by(KbDocument.created_at.desc(), KbDocument.id.desc())
            .limit(limit)
        )
        return [(row.id, row.title) for row in (await self.db.execute(statement)).all()]

    async def opening_texts(
        self, document_ids: Sequence[uuid.UUID], chunks: int
    ) -> list[tuple[uuid.UUID, str]]:
        """The text of each document's first `chunks` chunks, in order (where headings are)."""
        if not document_ids:
            return []
        statement = (
            select(KbChunk.document_id, KbChunk.text)
            .where(
                KbChunk.tenant_id == self.tenant_id,
                KbChunk.document_id.in_(document_ids),
                KbChunk.ordinal < chunks,
            )
            .order_by(KbChunk.document_id, KbChunk.ordinal)
        )
        return [(row.document_id, row.text) for row in (await self.db.execute(statement)).all()]
