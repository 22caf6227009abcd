"""FAQ entries: create (the question is embedded once, here), list, read, delete, match."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import NotFound
from app.embeddings.base import Embedder
from app.models import Faq

MAX_FAQS = 1000


@dataclass(frozen=True)
class FaqMatch:
    id: str
    question: str
    answer: str
    similarity: float


async def create_faq(
    db: AsyncSession, embedder: Embedder, tenant_id: uuid.UUID, question: str, answer: str
) -> Faq:
    [vector] = await embedder.embed([question])
    faq = Faq(tenant_id=tenant_id, id=uuid.uuid4(), question=question, answer=answer)
    faq.embedding = vector
    db.add(faq)
    await db.flush()
    return faq


async def list_faqs(db: AsyncSession, tenant_id: uuid.UUID) -> list[Faq]:
    rows = await db.execute(
        select(Faq).where(Faq.tenant_id == tenant_id).order_by(Faq.created_at, Faq.id)
    )
    return list(rows.scalars())


async def get_faq(db: AsyncSession, tenant_id: uuid.UUID, faq_id: uuid.UUID) -> Faq:
    faq = await db.get(Faq, (tenant_id, faq_id))
    if faq is None:
        raise NotFound("No such FAQ entry.", code="faq_not_found")
    return faq


async def delete_faq(db: AsyncSession, tenant_id: uuid.UUID, faq_id: uuid.UUID) -> None:
    deleted = await db.execute(
        delete(Faq).where(Faq.tenant_id == tenant_id, Faq.id == faq_id).returning(Faq.id)
    )
    if deleted.scalar_one_or_none() is None:
        raise NotFound("No such FAQ entry.", code="faq_not_found")


async def closest_faq(
    db: AsyncSession, tenant_id: uuid.UUID, vector: list[float]
) -> FaqMatch | None:
    """The tenant's FAQ entry closest to `vector` (cosine), with its similarity."""
    distance = Faq.embedding.cosine_distance(vector)
    row = (
        await db.execute(
            select(Faq.id, Faq.question, Faq.answer, distance.label("distance"))
            .where(Faq.tenant_id == tenant_id)
            .order_by(distance)
            .limit(1)
        )
    ).one_or_none()
    if row is None:
        return None
    return FaqMatch(str(row.id), row.question, row.answer, round(1.0 - float(row.distance), 6))
