"""SQL of turn feedback (`turn_feedback`): one row per turn, written by the turn's user."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Select, delete, func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import TurnFeedback


class FeedbackRepository:
    """The tenant's turn feedback."""

    def __init__(self, db: AsyncSession, tenant_id: uuid.UUID) -> None:
        self.db = db
        self.tenant_id = tenant_id

    async def put(
        self, turn_id: uuid.UUID, user_id: uuid.UUID, value: str, comment: str | None
    ) -> TurnFeedback:
        """Store the turn's feedback, replacing what it had (one statement: two tabs voting
        at once leave one row, the last one's)."""
        statement = (
            pg_insert(TurnFeedback)
            .values(
                tenant_id=self.tenant_id,
                turn_id=turn_id,
                user_id=user_id,
                value=value,
                comment=comment,
            )
            .on_conflict_do_update(
                index_elements=[TurnFeedback.tenant_id, TurnFeedback.turn_id],
                set_={"value": value, "comment": comment, "updated_at": func.clock_timestamp()},
            )
            .returning(TurnFeedback)
            .execution_options(populate_existing=True)
        )
        return (await self.db.execute(statement)).scalar_one()

    async def remove(self, turn_id: uuid.UUID, user_id: uuid.UUID) -> None:
        """Clear the user's feedback on the turn (none is not an error)."""
        await self.db.execute(
            delete(TurnFeedback).where(
                TurnFeedback.tenant_id == self.tenant_id,
                TurnFeedback.turn_id == turn_id,
                TurnFeedback.user_id == user_id,
            )
        )

    async def of_turns(self, turn_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, TurnFeedback]:
        """The feedback of these turns, by turn (those that have some)."""
        if not turn_ids:
            return {}
        rows = await self.db.execute(
            select(TurnFeedback).where(
                TurnFeedback.tenant_id == self.tenant_id, TurnFeedback.turn_id.in_(turn_ids)
            )
        )
        return {row.turn_id: row for row in rows.scalars()}


def exported_feedback(tenant_id: uuid.UUID, user_id: uuid.UUID) -> Select[*tuple[Any, ...]]:
    """The user's feedback as the privacy export lists it (the query, not yet run)."""
    return select(
        TurnFeedback.turn_id,
        TurnFeedback.value,
        TurnFeedback.comment,
        TurnFeedback.created_at,
        TurnFeedback.updated_at,
    ).where(TurnFeedback.tenant_id == tenant_id, TurnFeedback.user_id == user_id)
