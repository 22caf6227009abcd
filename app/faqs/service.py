"""FAQ entries: create (the question is embedded once, here), list, read, delete, match.

A change to a tenant's entries makes the tenant's cached guardrail policy (which counts them)
forget the tenant once the change commits, never before: a turn must not re-cache the old
count from a transaction that cannot see the change yet.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import Conflict, NotFound, ServiceUnavailable
from app.core.on_commit import on_commit
from app.core.tenant_cache import TenantInvalidator
from app.embeddings.base import Embedder
from app.embeddings.repository import recorded_model
from app.faqs.repository import FaqRepository
from app.models import Faq

MAX_FAQS = 1000


@dataclass(frozen=True)
class FaqMatch:
    """The FAQ entry nearest a question, with its cosine similarity."""

    id: str
    question: str
    answer: str
    similarity: float


async def create_faq(
    db: AsyncSession,
    embedder: Embedder,
    policies: TenantInvalidator,
    tenant_id: uuid.UUID,
    question: str,
    answer: str,
) -> Faq:
    """Store a new entry (at most MAX_FAQS per tenant), its question embedded."""
    repository = FaqRepository(db, tenant_id)
    [vector] = await embedder.embed([question])  # before the lock: it is held to the commit
    if await repository.count_for_adding() >= MAX_FAQS:
        raise Conflict(f"A tenant has at most {MAX_FAQS} FAQ entries.", code="faq_limit")
    faq = Faq(tenant_id=tenant_id, id=uuid.uuid4(), question=question, answer=answer)
    faq.embedding = vector
    repository.add(faq)
    await db.flush()
    # After the write, as ingestion does: a reindex switching models holds the table until it
    # commits, so this read sees the model it recorded; an old model's vector must not land
    # in the new space.
    if await recorded_model(db) not in (None, embedder.name):
        raise ServiceUnavailable(
            "The knowledge base's embedding model was changed by `threadline reindex`; this "
            "server must be restarted with the new THREADLINE_EMBEDDER.",
            code="embedding_model_changed",
        )
    on_commit(db, lambda: policies.invalidate(tenant_id))
    return faq


async def list_faqs(db: AsyncSession, tenant_id: uuid.UUID) -> list[Faq]:
    """The tenant's entries, oldest first."""
    return await FaqRepository(db, tenant_id).oldest_first()


async def get_faq(db: AsyncSession, tenant_id: uuid.UUID, faq_id: uuid.UUID) -> Faq:
    """One entry of the tenant's (404 when there is none)."""
    faq = await FaqRepository(db, tenant_id).get(faq_id)
    if faq is None:
        raise NotFound("No such FAQ entry.", code="faq_not_found")
    return faq


async def delete_faq(
    db: AsyncSession, policies: TenantInvalidator, tenant_id: uuid.UUID, faq_id: uuid.UUID
) -> None:
    """Delete one entry of the tenant's (404 when there is none)."""
    if not await FaqRepository(db, tenant_id).delete_by_id(faq_id):
        raise NotFound("No such FAQ entry.", code="faq_not_found")
    on_commit(db, lambda: policies.invalidate(tenant_id))


async def closest_faq(
    db: AsyncSession, tenant_id: uuid.UUID, vector: list[float]
) -> FaqMatch | None:
    """The tenant's FAQ entry closest to `vector` (cosine), with its similarity."""
    found = await FaqRepository(db, tenant_id).closest(vector)
    if found is None:
        return None
    faq_id, question, answer, distance = found
    return FaqMatch(str(faq_id), question, answer, round(1.0 - distance, 6))
