"""SQL for turns (`query_history`) and the session's running summary."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import exists, func, insert, literal, select, update
from sqlalchemy.dialects.postgresql import ARRAY, UUID

from app.core.pagination import Cursor
from app.core.repository import TenantRepository
from app.graph.state import HistoryTurn
from app.models import ChatSession, QueryHistory, SessionAttachment

HISTORY_STATUSES = ("complete", "incomplete")


def _as_history(row: QueryHistory) -> HistoryTurn:
    return HistoryTurn(
        turn_id=str(row.id), user_query=row.user_query, answer=row.answer, status=row.status
    )


class TurnRepository(TenantRepository[QueryHistory]):
    """A session's turns: the pipeline's history and the `/sessions/{id}/turns` listing."""

    model = QueryHistory

    async def page(
        self, session_id: uuid.UUID, *, limit: int, after: Cursor | None
    ) -> list[QueryHistory]:
        statement = self.scoped().where(QueryHistory.session_id == session_id)
        return await self.keyset_page(statement, limit=limit, after=after)

    async def recent(self, session_id: uuid.UUID, limit: int) -> tuple[list[HistoryTurn], int]:
        """The last `limit` finished turns of the session, oldest first, and how many finished
        turns it has in all (one query)."""
        rows = (
            await self.session.execute(
                select(
                    QueryHistory.id,
                    QueryHistory.user_query,
                    QueryHistory.answer,
                    QueryHistory.status,
                    func.count().over().label("total"),
                )
                .where(
                    QueryHistory.tenant_id == self.tenant_id,
                    QueryHistory.session_id == session_id,
                    QueryHistory.status.in_(HISTORY_STATUSES),
                )
                .order_by(QueryHistory.created_at.desc(), QueryHistory.id.desc())
                .limit(max(limit, 1))
            )
        ).all()
        total = int(rows[0].total) if rows else 0
        turns = [
            HistoryTurn(
                turn_id=str(row.id), user_query=row.user_query, answer=row.answer, status=row.status
            )
            for row in reversed(rows)
        ]
        return (turns if limit > 0 else []), total

    async def finished_slice(
        self, session_id: uuid.UUID, offset: int, limit: int
    ) -> list[HistoryTurn]:
        """Finished turns `offset .. offset+limit` in chronological order."""
        if limit <= 0:
            return []
        rows = await self.session.execute(
            self.scoped()
            .where(
                QueryHistory.session_id == session_id,
                QueryHistory.status.in_(HISTORY_STATUSES),
            )
            .order_by(QueryHistory.created_at, QueryHistory.id)
            .offset(offset)
            .limit(limit)
        )
        return [_as_history(row) for row in rows.scalars()]

    async def admit(
        self,
        *,
        turn_id: uuid.UUID,
        session_id: uuid.UUID,
        user_id: uuid.UUID,
        user_query: str,
        attachment_ids: list[uuid.UUID],
    ) -> list[uuid.UUID] | None:
        """Record a new pending turn if the session is the user's, in one statement, and
        return the session's active attachments; None if the session is not theirs.

        One round trip for the ownership check, the turn's row and the attachment set keeps
        a turn's fixed cost near the irreducible work (see bench/chat_overhead.py)."""
        owned = (
            select(ChatSession.id)
            .where(
                ChatSession.tenant_id == self.tenant_id,
                ChatSession.id == session_id,
                ChatSession.user_id == user_id,
            )
            .cte("owned")
        )
        values = select(
            literal(self.tenant_id, UUID(as_uuid=True)),
            literal(turn_id, UUID(as_uuid=True)),
            owned.c.id,
            literal(user_id, UUID(as_uuid=True)),
            literal(user_query),
            literal("pending"),
            literal(attachment_ids, ARRAY(UUID(as_uuid=True))),
        )
        columns = ("tenant_id", "id", "session_id", "user_id", "user_query", "status")
        admitted = (
            insert(QueryHistory)
            .from_select([*columns, "attachment_ids"], values)
            .returning(QueryHistory.id)
            .cte("admitted")
        )
        active = (
            select(SessionAttachment.attachment_id)
            .where(
                SessionAttachment.tenant_id == self.tenant_id,
                SessionAttachment.session_id == session_id,
                exists(owned.select()),
            )
            .order_by(SessionAttachment.created_at)
        )
        row = (
            await self.session.execute(
                select(
                    select(func.count()).select_from(admitted).scalar_subquery(),
                    func.array(active.scalar_subquery()),
                )
            )
        ).one()
        return list(row[1]) if row[0] else None

    async def complete(
        self,
        turn_id: uuid.UUID,
        session_id: uuid.UUID,
        summary: tuple[str, int] | None,
        **values: Any,
    ) -> int:
        """Record a turn's outcome and touch its session (storing a new running summary if
        there is one) in one statement; returns how many *other* finished turns the session
        has, which tells the caller whether its view of the history is still current."""
        finished_turn = (
            update(QueryHistory)
            .where(QueryHistory.tenant_id == self.tenant_id, QueryHistory.id == turn_id)
            .values(completed_at=func.clock_timestamp(), **values)
            .returning(QueryHistory.id)
            .cte("finished_turn")
        )
        session_values: dict[str, Any] = {"updated_at": func.clock_timestamp()}
        if summary is not None:
            session_values.update(summary=summary[0], summarized_turns=summary[1])
        touched_session = (
            update(ChatSession)
            .where(ChatSession.tenant_id == self.tenant_id, ChatSession.id == session_id)
            .values(**session_values)
            .returning(ChatSession.id)
            .cte("touched_session")
        )
        # The count runs on the statement's snapshot: it does not see this turn as finished.
        others = (
            select(func.count())
            .select_from(QueryHistory)
            .where(
                QueryHistory.tenant_id == self.tenant_id,
                QueryHistory.session_id == session_id,
                QueryHistory.status.in_(HISTORY_STATUSES),
            )
            .add_cte(finished_turn, touched_session)
        )
        return int((await self.session.execute(others)).scalar_one())

    async def finish_unfinished(self, turn_id: uuid.UUID, **values: Any) -> None:
        """Like `finish`, but only for a turn still pending (never overwrite a result)."""
        await self.session.execute(
            update(QueryHistory)
            .where(
                QueryHistory.tenant_id == self.tenant_id,
                QueryHistory.id == turn_id,
                QueryHistory.status == "pending",
            )
            .values(completed_at=datetime.now(UTC), **values)
        )


class SessionStateRepository(TenantRepository[ChatSession]):
    model = ChatSession

    async def summary(self, session_id: uuid.UUID) -> tuple[str, int]:
        row = (
            await self.session.execute(
                select(ChatSession.summary, ChatSession.summarized_turns).where(
                    ChatSession.tenant_id == self.tenant_id, ChatSession.id == session_id
                )
            )
        ).one_or_none()
        if row is None:
            return "", 0
        return row.summary or "", int(row.summarized_turns)

    async def active_attachment_ids(self, session_id: uuid.UUID) -> list[uuid.UUID]:
        rows = await self.session.execute(
            select(SessionAttachment.attachment_id)
            .where(
                SessionAttachment.tenant_id == self.tenant_id,
                SessionAttachment.session_id == session_id,
            )
            .order_by(SessionAttachment.created_at)
        )
        return list(rows.scalars())
