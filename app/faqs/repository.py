"""SQL for a tenant's FAQ entries."""

from __future__ import annotations

import uuid

from sqlalchemy import delete, func, select, text

from app.core.repository import TenantRepository
from app.models import Faq


class FaqRepository(TenantRepository[Faq]):
    """The tenant's FAQ entries: count, list, delete and the nearest match."""

    model = Faq

    async def count_for_adding(self) -> int:
        """How many entries the tenant has, counted under a transaction-long lock on the
        tenant's FAQ set: two admins adding at once cannot both pass the cap."""
        await self.db.execute(
            text("SELECT pg_advisory_xact_lock(hashtextextended('threadline.faqs:' || :t, 0))"),
            {"t": str(self.tenant_id)},
        )
        counted = await self.db.scalar(
            select(func.count()).select_from(Faq).where(Faq.tenant_id == self.tenant_id)
        )
        return int(counted or 0)

    async def oldest_first(self) -> list[Faq]:
        """Every entry, oldest first."""
        rows = await self.db.execute(self.scoped().order_by(Faq.created_at, Faq.id))
        return list(rows.scalars())

    async def delete_by_id(self, faq_id: uuid.UUID) -> bool:
        """Delete the entry; False when the tenant has no such entry."""
        deleted = await self.db.execute(
            delete(Faq).where(Faq.tenant_id == self.tenant_id, Faq.id == faq_id).returning(Faq.id)
        )
        return deleted.scalar_one_or_none() is not None

    async def closest(self, vector: list[float]) -> tuple[uuid.UUID, str, str, float] | None:
        """The entry closest to `vector` by cosine distance: id, question, answer, distance."""
        distance = Faq.embedding.cosine_distance(vector)
        row = (
            await self.db.execute(
                select(Faq.id, Faq.question, Faq.answer, distance.label("distance"))
                .where(Faq.tenant_id == self.tenant_id)
                .order_by(distance)
                .limit(1)
            )
        ).one_or_none()
        return None if row is None else (row.id, row.question, row.answer, float(row.distance))
