"""SQL for turns (`query_history`) and the session's running summary."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select, update

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

    async def finish(self, turn_id: uuid.UUID, **values: Any) -> None:
        """Record the outcome of a turn (status, answer, metadata ...)."""
        await self.session.execute(
            update(QueryHistory)
            .where(QueryHistory.tenant_id == self.tenant_id, QueryHistory.id == turn_id)
            .values(completed_at=datetime.now(UTC), **values)
        )

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

    async def touch(self, session_id: uuid.UUID, summary: tuple[str, int] | None = None) -> None:
        """Mark the session active now; store its new running summary if there is one."""
        values: dict[str, Any] = {"updated_at": func.clock_timestamp()}
        if summary is not None:
            values.update(summary=summary[0], summarized_turns=summary[1])
        await self.session.execute(
            update(ChatSession)
            .where(ChatSession.tenant_id == self.tenant_id, ChatSession.id == session_id)
            .values(**values)
        )

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
