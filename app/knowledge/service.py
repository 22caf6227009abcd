"""Adding, listing and deleting knowledge-base documents. Never commits."""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from app.access.scope import check_collection
from app.auth.principal import Principal
from app.core.downloads import StoredFile
from app.core.errors import Conflict, NotFound
from app.core.jobs import enqueue_after_commit
from app.core.json_types import JsonObject
from app.core.on_commit import on_commit
from app.core.pagination import Cursor, split_page
from app.core.tenant_cache import TenantInvalidator
from app.ingestion.jobs import ingest_job
from app.ingestion.uploads import Upload
from app.knowledge.repository import DocumentRepository
from app.models import KbDocument
from app.retrieval.base import Hit
from app.retrieval.hybrid import HybridRetriever


async def add_document(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    upload: Upload,
    *,
    title: str | None,
    external_id: str | None,
    metadata: JsonObject,
    created_by: uuid.UUID | None,
    enqueue: bool = True,
    language: str | None = None,
    collection_id: uuid.UUID | None = None,
) -> tuple[KbDocument, bool]:
    """The new document (queued for ingestion after commit unless `enqueue` is false), or
    the existing one with the same content in this tenant (`True`: a duplicate, left in its
    own collection). `language`: its own text-search language (checked), else None: the
    tenant's. `collection_id`: the collection it goes into, checked before anything is
    written (404 `collection_not_found` for one the caller may not see); None: the tenant's
    default (a trigger sets it)."""
    placed: dict[str, uuid.UUID] = {}
    if collection_id is not None:
        await check_collection(db, tenant_id, collection_id)
        placed["collection_id"] = collection_id
    documents = DocumentRepository(db, tenant_id)
    for _ in range(3):  # the copy that was in the way can be deleted before it is read
        document = await documents.insert_new(
            id=uuid.uuid4(),
            title=title or upload.filename or "Untitled",
            external_id=external_id,
            doc_metadata=metadata,
            created_by=created_by,
            language=language,
            **placed,
            **upload.new_document_columns(),
        )
        if document is not None:
            break
        existing = await documents.by_hash(upload.content_hash)
        if existing is None:
            continue
        if existing.status == "failed" and enqueue:  # uploading it again means: try again
            await documents.requeue_failed(existing)
            enqueue_after_commit(db, ingest_job("kb", tenant_id, existing.id))
        return existing, True
    else:
        raise Conflict("The same file is being added and deleted; try again.", code="busy")
    if enqueue:
        enqueue_after_commit(db, ingest_job("kb", tenant_id, document.id))
    return document, False


async def get_document(db: AsyncSession, principal: Principal, doc_id: uuid.UUID) -> KbDocument:
    """One of the tenant's documents; 404 when it has none with this id."""
    document = await DocumentRepository(db, principal.tenant_id).get(doc_id)
    if document is None:
        raise NotFound("No such document.", code="document_not_found")
    return document


async def delete_document(
    db: AsyncSession, kb_status: TenantInvalidator, principal: Principal, doc_id: uuid.UUID
) -> None:
    """The document goes with its chunks and embeddings (ON DELETE CASCADE); once that
    commits, the cached "has documents" answer for the tenant is forgotten."""
    document = await get_document(db, principal, doc_id)
    await DocumentRepository(db, principal.tenant_id).delete(document)
    await db.flush()
    on_commit(db, lambda: kb_status.invalidate(principal.tenant_id))


async def list_documents(
    db: AsyncSession, principal: Principal, *, limit: int, cursor: str | None
) -> tuple[list[KbDocument], str | None]:
    """One page of the tenant's documents and the cursor of the next."""
    after = Cursor.decode(cursor) if cursor else None
    rows = await DocumentRepository(db, principal.tenant_id).page(limit=limit, after=after)
    return split_page(rows, limit)


async def search(
    db: AsyncSession, retriever: HybridRetriever, tenant_id: uuid.UUID, query: str, *, k: int
) -> list[Hit]:
    """The same hybrid retrieval the chat uses, over the tenant's knowledge base, ranked."""
    return await retriever.search_hits(db, tenant_id, query, k=k)


async def original_file(db: AsyncSession, principal: Principal, doc_id: uuid.UUID) -> StoredFile:
    """The document's uploaded file: any of the tenant's for an admin, a ready (searchable)
    one for a member; 404 otherwise."""
    stored = await DocumentRepository(db, principal.tenant_id).original(
        doc_id, ready_only=not principal.is_admin
    )
    if stored is None:
        raise NotFound("No such document.", code="document_not_found")
    return stored
