"""SQL for chat sessions (`chat_sessions`): the listing, a session's ownership, what a turn
reads and links on its session (the running summary, the background job's claim on it, the
session's attachments), and what the retention sweep, the export and the erasure need of a
user's sessions."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import CursorResult, Row, Select, delete, func, or_, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert

from app.conversation.repository.turns import mentioned_in_turns
from app.core.pagination import Cursor
from app.core.repository import TenantRepository, containing
from app.models import Attachment, ChatSession, SessionAttachment

# A fold is bookkeeping, not activity: the session's `updated_at` (its place in the listing)
# stays as the last turn left it.
_KEEP_UPDATED_AT = {"updated_at": ChatSession.updated_at}


class SessionStateRepository(TenantRepository[ChatSession]):
    """A chat session's running summary and active attachments, as a turn reads them."""

    model = ChatSession

    async def summary(self, session_id: uuid.UUID) -> tuple[str, int]:
        """The session's running summary and how many turns it covers."""
        row = (
            await self.db.execute(
                select(ChatSession.summary, ChatSession.summarized_turns).where(
                    ChatSession.tenant_id == self.tenant_id, ChatSession.id == session_id
                )
            )
        ).one_or_none()
        if row is None:
            return "", 0
        return row.summary or "", int(row.summarized_turns)

    async def claim_fold(
        self, session_id: uuid.UUID, seconds: float
    ) -> tuple[str, int, datetime] | None:
        """Claim the session's summary for one fold (compare-and-set on the row): its text,
        the turns it covers and the claim's end (what `store_fold` checks); None when another
        job's claim still holds (or no session)."""
        now = func.clock_timestamp()
        row = (
            await self.db.execute(
                update(ChatSession)
                .where(
                    ChatSession.tenant_id == self.tenant_id,
                    ChatSession.id == session_id,
                    or_(
                        ChatSession.summary_claimed_until.is_(None),
                        ChatSession.summary_claimed_until < now,
                    ),
                )
                .values(summary_claimed_until=now + timedelta(seconds=seconds), **_KEEP_UPDATED_AT)
                .returning(
                    ChatSession.summary,
                    ChatSession.summarized_turns,
                    ChatSession.summary_claimed_until,
                )
                .execution_options(synchronize_session=False)
            )
        ).one_or_none()
        if row is None:
            return None
        return row.summary or "", int(row.summarized_turns), row.summary_claimed_until

    async def store_fold(
        self,
        session_id: uuid.UUID,
        claim: datetime,
        covered_before: int,
        summary: str,
        covered: int,
    ) -> bool:
        """Store a folded summary and release the claim, only if this job's `claim` still
        holds and the summary still covers `covered_before` turns (no other job took over
        after the claim lapsed; retention did not reset the summary meanwhile); whether it
        was stored."""
        stored = await self.db.execute(
            update(ChatSession)
            .where(
                ChatSession.tenant_id == self.tenant_id,
                ChatSession.id == session_id,
                ChatSession.summary_claimed_until == claim,
                ChatSession.summarized_turns == covered_before,
            )
            .values(
                summary=summary,
                summarized_turns=covered,
                summary_claimed_until=None,
                **_KEEP_UPDATED_AT,
            )
            .returning(ChatSession.id)
            .execution_options(synchronize_session=False)
        )
        return stored.one_or_none() is not None

    async def release_fold(self, session_id: uuid.UUID) -> None:
        """Give up the claim without a new summary (nothing due, or the fold failed)."""
        await self.db.execute(
            update(ChatSession)
            .where(ChatSession.tenant_id == self.tenant_id, ChatSession.id == session_id)
            .values(summary_claimed_until=None, **_KEEP_UPDATED_AT)
            .execution_options(synchronize_session=False)
        )

    async def active_attachment_ids(self, session_id: uuid.UUID) -> list[uuid.UUID]:
        """The attachments active in the session, oldest first."""
        rows = await self.db.execute(
            select(SessionAttachment.attachment_id)
            .where(
                SessionAttachment.tenant_id == self.tenant_id,
                SessionAttachment.session_id == session_id,
            )
            .order_by(SessionAttachment.created_at)
        )
        return list(rows.scalars())

    async def owned_attachments(
        self, user_id: uuid.UUID, attachment_ids: Sequence[uuid.UUID]
    ) -> set[uuid.UUID]:
        """Which of `attachment_ids` are this user's (unknown and foreign ones are left out)."""
        if not attachment_ids:
            return set()
        rows = await self.db.scalars(
            select(Attachment.id).where(
                Attachment.tenant_id == self.tenant_id,
                Attachment.user_id == user_id,
                Attachment.id.in_(attachment_ids),
            )
        )
        return set(rows)

    async def link_attachments(
        self, session_id: uuid.UUID, attachment_ids: Sequence[uuid.UUID]
    ) -> None:
        """Make the attachments active in the session (linking one twice is a no-op)."""
        links = [
            {"tenant_id": self.tenant_id, "session_id": session_id, "attachment_id": a}
            for a in attachment_ids
        ]
        await self.db.execute(pg_insert(SessionAttachment).values(links).on_conflict_do_nothing())

    async def attachment_statuses(
        self, attachment_ids: Sequence[uuid.UUID]
    ) -> Sequence[Row[uuid.UUID, str, str | None]]:
        """Each attachment's id, processing status and error."""
        statement = select(Attachment.id, Attachment.status, Attachment.error).where(
            Attachment.tenant_id == self.tenant_id, Attachment.id.in_(attachment_ids)
        )
        return (await self.db.execute(statement)).all()


class SessionRepository(TenantRepository[ChatSession]):
    """The tenant's chat sessions."""

    model = ChatSession

    async def owned(self, session_id: uuid.UUID, user_id: uuid.UUID) -> ChatSession | None:
        """The session if it belongs to this user; None for unknown and foreign alike."""
        result = await self.db.execute(
            self.scoped().where(ChatSession.id == session_id, ChatSession.user_id == user_id)
        )
        return result.scalar_one_or_none()

    async def page(
        self,
        user_id: uuid.UUID,
        *,
        limit: int,
        after: Cursor | None,
        q: str | None = None,
        pinned: bool | None = None,
    ) -> list[ChatSession]:
        """One page of the user's sessions, keyset-paginated; with `q`, only those whose
        title or one of whose turns (question or answer) contains it, case-insensitively;
        with `pinned`, only the pinned ones (True) or only the others (False)."""
        statement = self.scoped().where(ChatSession.user_id == user_id)
        if pinned is not None:
            statement = statement.where(
                ChatSession.pinned_at.is_not(None) if pinned else ChatSession.pinned_at.is_(None)
            )
        if q:
            in_turns = mentioned_in_turns(self.tenant_id, ChatSession.id, q)
            statement = statement.where(
                or_(ChatSession.title.ilike(containing(q), escape="\\"), in_turns)
            )
        return await self.keyset_page(statement, limit=limit, after=after)

    # --- a user's sessions: the retention sweep, export and erasure ---

    async def session_ids_of(self, user_id: uuid.UUID) -> list[uuid.UUID]:
        """The user's chat sessions."""
        return list((await self.db.execute(user_session_ids(self.tenant_id, user_id))).scalars())

    async def delete_of(self, user_id: uuid.UUID) -> int:
        """Delete the user's chat sessions; how many."""
        result = await self.db.execute(
            delete(ChatSession).where(
                ChatSession.tenant_id == self.tenant_id, ChatSession.user_id == user_id
            )
        )
        return int(cast(CursorResult[Any], result).rowcount)

    async def reset_summaries(self, session_ids: Sequence[uuid.UUID]) -> int:
        """Drop the running summary of these sessions (those that have one, or a fold under
        way: its claim goes too, so the fold of purged turns is not stored); how many."""
        result = await self.db.execute(
            update(ChatSession)
            .where(
                ChatSession.tenant_id == self.tenant_id,
                ChatSession.id.in_(session_ids),
                or_(
                    ChatSession.summarized_turns > 0,
                    ChatSession.summary_claimed_until.is_not(None),
                ),
            )
            .values(summary=None, summarized_turns=0, summary_claimed_until=None)
        )
        return int(cast(CursorResult[Any], result).rowcount)


def user_session_ids(tenant_id: uuid.UUID, user_id: uuid.UUID) -> Select[uuid.UUID]:
    """The query of the user's session ids (not yet run), for a statement to filter by."""
    return select(ChatSession.id).where(
        ChatSession.tenant_id == tenant_id, ChatSession.user_id == user_id
    )


def exported_sessions(tenant_id: uuid.UUID, user_id: uuid.UUID) -> Select[*tuple[Any, ...]]:
    """The user's sessions as the privacy export lists them (the query, not yet run)."""
    return select(
        ChatSession.id,
        ChatSession.title,
        ChatSession.summary,
        ChatSession.summarized_turns,
        ChatSession.pinned_at,
        ChatSession.created_at,
        ChatSession.updated_at,
    ).where(ChatSession.tenant_id == tenant_id, ChatSession.user_id == user_id)
