"""SQL for turns (`query_history`): the turn pipeline, the listing, the history window, the
agent's look-ups of earlier answers, the conversation search, and what feedback, the audit,
the retention sweep, the export and the erasure need of a user's or a tenant's turns.

Over 300 lines because every statement on the one table a turn lives in is here, each small
(the leases of running turns excepted: `turn_leases.py`); the statements of the session row
and of history caching are modules of their own."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple, cast

from sqlalchemy import (
    Boolean,
    ColumnElement,
    CursorResult,
    Float,
    Integer,
    Row,
    Select,
    SmallInteger,
    SQLColumnExpression,
    Text,
    bindparam,
    column,
    delete,
    exists,
    func,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, UUID

from app.conversation.turn.filters import TurnFilters
from app.conversation.turn.manifest import MANIFEST_VERSION, Manifest
from app.conversation.turn.types import HistoryTurn
from app.core.pagination import Cursor
from app.core.process import process_id
from app.core.repository import TenantRepository, containing
from app.models import QueryHistory, TurnFeedback

HISTORY_STATUSES = ("complete", "incomplete")

# The two statements of every turn are written once, as SQL: building them per turn with the
# expression language cost more CPU than running them.
_ADMIT = (
    text(
        """
    WITH owned AS (
      SELECT id FROM chat_sessions
      WHERE tenant_id = :tenant AND id = :session AND user_id = :user
    ), admitted AS (
      INSERT INTO query_history
        (tenant_id, id, session_id, user_id, user_query, status, attachment_ids,
         idempotency_key, lease_owner, lease_expires_at)
      SELECT :tenant, :turn, owned.id, :user, :query, 'pending', :attachments,
             :idempotency_key, :lease_owner,
             clock_timestamp() + make_interval(secs => :lease_seconds)
      FROM owned
      RETURNING id
    )
    SELECT (SELECT count(*) FROM admitted) AS admitted,
           ARRAY(SELECT attachment_id FROM session_attachments
                 WHERE tenant_id = :tenant AND session_id = :session
                   AND EXISTS (SELECT 1 FROM owned)
                 ORDER BY created_at) AS active,
           ARRAY(SELECT collection_id FROM session_collections
                 WHERE tenant_id = :tenant AND session_id = :session
                   AND EXISTS (SELECT 1 FROM owned)
                 ORDER BY collection_id) AS scope,
           (SELECT count(*) FROM query_history
            WHERE tenant_id = :tenant AND session_id = :session
              AND status = ANY(:finished)) AS finished
    """
    )
    .bindparams(
        bindparam("tenant", type_=UUID(as_uuid=True)),
        bindparam("turn", type_=UUID(as_uuid=True)),
        bindparam("session", type_=UUID(as_uuid=True)),
        bindparam("user", type_=UUID(as_uuid=True)),
        bindparam("attachments", type_=ARRAY(UUID(as_uuid=True))),
        bindparam("idempotency_key", type_=Text),
        bindparam("lease_owner", type_=Text),
        bindparam("lease_seconds", type_=Float),
        bindparam("finished", value=list(HISTORY_STATUSES), type_=ARRAY(Text)),
    )
    .columns(
        column("admitted", Integer),
        column("active", ARRAY(UUID(as_uuid=True))),
        column("scope", ARRAY(UUID(as_uuid=True))),
        column("finished", Integer),
    )
)

# Only the lease's owner completes a pending turn (ADR 0068): a process whose lease expired
# while it was alive (paused, starved) finds its turn finished as an orphan by another one and
# must not overwrite that outcome. The orphan's finisher holds the row's lock while it writes:
# this UPDATE waits for it, then sees the new status and matches nothing.
# The count runs on the statement's snapshot: it does not see this turn as finished yet. The
# session's running summary comes back with it (the background job may have folded since the
# turn read it), so the history cache is refreshed with the summary as stored.
_COMPLETE = text(
    """
    WITH finished_turn AS (
      UPDATE query_history
      SET status = 'complete', answer = :answer, query_composition = :composition,
          context_metadata = :metadata, manifest_version = :manifest_version, model = :model,
          prompt_tokens = :prompt_tokens, completion_tokens = :completion_tokens,
          latency_ms = :latency_ms,
          completed_at = clock_timestamp()
      WHERE tenant_id = :tenant AND id = :turn
        AND status = 'pending' AND lease_owner = :owner
      RETURNING id
    ), touched_session AS (
      UPDATE chat_sessions SET updated_at = clock_timestamp()
      WHERE tenant_id = :tenant AND id = :session AND EXISTS (SELECT 1 FROM finished_turn)
      RETURNING summary, summarized_turns
    )
    SELECT (SELECT count(*) FROM finished_turn) AS completed,
           (SELECT count(*) FROM query_history
            WHERE tenant_id = :tenant AND session_id = :session
              AND status = ANY(:finished)) AS others,
           (SELECT coalesce(summary, '') FROM touched_session) AS summary,
           (SELECT summarized_turns FROM touched_session) AS summarized_turns
    """
).bindparams(
    bindparam("tenant", type_=UUID(as_uuid=True)),
    bindparam("turn", type_=UUID(as_uuid=True)),
    bindparam("session", type_=UUID(as_uuid=True)),
    bindparam("metadata", type_=JSONB),
    bindparam("manifest_version", type_=SmallInteger),
    bindparam("finished", value=list(HISTORY_STATUSES), type_=ARRAY(Text)),
)


class TurnNotOwned(Exception):
    """The turn is no longer pending under this process's lease: another process finished
    it (its lease expired while this one still ran it). What is stored stands."""

    def __init__(self, turn_id: uuid.UUID) -> None:
        super().__init__(f"turn {turn_id} was finished by another process")
        self.turn_id = turn_id


class Admitted(NamedTuple):
    """What admitting a turn tells its caller about the session."""

    active: list[uuid.UUID]
    """The attachments already active in the session."""
    finished: int
    """Its finished turns (what its cached history must count, or it is stale)."""
    scope: list[uuid.UUID]
    """The collections the session is restricted to (empty: not restricted)."""


class Completed(NamedTuple):
    """What completing a turn tells its caller: the session's other finished turns, and its
    running summary as stored (text, turns covered)."""

    others: int
    summary: str
    summarized_turns: int


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
        """One page of a session's turns, newest first (the turns listing)."""
        statement = self.scoped().where(QueryHistory.session_id == session_id)
        return await self.keyset_page(statement, limit=limit, after=after)

    async def recent(self, session_id: uuid.UUID, limit: int) -> tuple[list[HistoryTurn], int]:
        """The last `limit` finished turns of the session, oldest first, and how many finished
        turns it has in all (one query)."""
        rows = (
            await self.db.execute(
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
        rows = await self.db.execute(
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
        lease_seconds: float = 30.0,
        idempotency_key: str | None = None,
    ) -> Admitted | None:
        """Record a new pending turn if the session is the user's, in one statement, and
        return the session's active attachments, finished turns and collection scope; None
        if the session is not theirs.

        The turn is leased to this process for `lease_seconds` (renewed while it runs, see
        app/conversation/durability/leases.py); `idempotency_key` is the Redis key of its claim and
        the
        request's fingerprint, one per line, if it has one.

        One round trip for the ownership check, the turn's row and the attachment set keeps
        a turn's fixed cost near the irreducible work (see bench/chat_overhead.py)."""
        row = (
            await self.db.execute(
                _ADMIT,
                {
                    "tenant": self.tenant_id,
                    "turn": turn_id,
                    "session": session_id,
                    "user": user_id,
                    "query": user_query,
                    "attachments": attachment_ids,
                    "idempotency_key": idempotency_key,
                    "lease_owner": process_id(),
                    "lease_seconds": lease_seconds,
                },
            )
        ).one()
        if not row.admitted:
            return None
        return Admitted(list(row.active), row.finished, list(row.scope))

    async def complete(
        self,
        turn_id: uuid.UUID,
        session_id: uuid.UUID,
        *,
        answer: str,
        query_composition: str,
        manifest: Manifest,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        latency_ms: int,
    ) -> Completed:
        """Record a turn's outcome and touch its session in one statement; returns how many
        *other* finished turns the session has (which tells the caller whether its view of
        the history is still current) and the session's running summary as stored. Raises
        `TurnNotOwned` when the turn is no longer this process's running turn (it was
        finished by another process after its lease expired): nothing was written."""
        result = await self.db.execute(
            _COMPLETE,
            {
                "tenant": self.tenant_id,
                "turn": turn_id,
                "owner": process_id(),
                "session": session_id,
                "answer": answer,
                "composition": query_composition,
                "metadata": manifest.dump(),
                "manifest_version": MANIFEST_VERSION,
                "model": model,
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "latency_ms": latency_ms,
            },
        )
        row = result.one()
        if not row.completed:
            raise TurnNotOwned(turn_id)
        return Completed(int(row.others), row.summary or "", int(row.summarized_turns or 0))

    async def finish_unfinished(
        self, turn_id: uuid.UUID, *, manifest: Manifest, **values: Any
    ) -> bool:
        """Like `finish`, but only for a turn still pending (never overwrite a result); False
        when it was not pending any more (nothing written)."""
        result = await self.db.execute(
            update(QueryHistory)
            .where(
                QueryHistory.tenant_id == self.tenant_id,
                QueryHistory.id == turn_id,
                QueryHistory.status == "pending",
            )
            .values(
                completed_at=datetime.now(UTC),
                context_metadata=manifest.dump(),
                manifest_version=MANIFEST_VERSION,
                **values,
            )
        )
        return bool(cast(CursorResult[Any], result).rowcount)

    async def prompt_sources(self, session_id: uuid.UUID, turn_id: uuid.UUID) -> list[Any]:
        """The numbered sources of one finished turn of the session as its manifest recorded
        them (`context_metadata.sources`, in prompt order); empty if none or no such turn."""
        statement = select(QueryHistory.context_metadata["sources"]).where(
            QueryHistory.tenant_id == self.tenant_id,
            QueryHistory.session_id == session_id,
            QueryHistory.id == turn_id,
            QueryHistory.status.in_(HISTORY_STATUSES),
        )
        sources = (await self.db.execute(statement)).scalar_one_or_none()
        return list(sources) if isinstance(sources, list) else []

    async def finished_answer(
        self, user_id: uuid.UUID, session_id: uuid.UUID, turn_id: uuid.UUID
    ) -> Row[uuid.UUID, str, str] | None:
        """One complete, unblocked earlier turn of this user's session (the agent's tool)."""
        statement = select(QueryHistory.id, QueryHistory.user_query, QueryHistory.answer).where(
            *self._own_finished(user_id, session_id), QueryHistory.id == turn_id
        )
        return (await self.db.execute(statement)).one_or_none()

    async def finished_about(
        self, user_id: uuid.UUID, session_id: uuid.UUID, words: list[str], limit: int
    ) -> Sequence[Row[uuid.UUID, str, str]]:
        """The newest complete, unblocked turns of the session that mention any of `words`."""
        matches = [
            or_(
                QueryHistory.user_query.ilike(containing(w), escape="\\"),
                QueryHistory.answer.ilike(containing(w), escape="\\"),
            )
            for w in words
        ]
        statement = (
            select(QueryHistory.id, QueryHistory.user_query, QueryHistory.answer)
            .where(*self._own_finished(user_id, session_id), or_(*matches))
            .order_by(QueryHistory.created_at.desc())
            .limit(limit)
        )
        return (await self.db.execute(statement)).all()

    def _own_finished(self, user_id: uuid.UUID, session_id: uuid.UUID) -> list[Any]:
        # A turn the input guardrail blocked is never shown to the model again.
        not_blocked = QueryHistory.context_metadata["triage"]["route"].astext.is_distinct_from(
            "blocked"
        )
        return [
            QueryHistory.tenant_id == self.tenant_id,
            QueryHistory.user_id == user_id,
            QueryHistory.session_id == session_id,
            QueryHistory.status == "complete",
            not_blocked,
        ]

    # --- a user's own turns: feedback on them ---

    async def own_status(self, user_id: uuid.UUID, turn_id: uuid.UUID) -> str | None:
        """The turn's status when it is this user's; None for unknown and foreign alike."""
        statement = select(QueryHistory.status).where(
            QueryHistory.tenant_id == self.tenant_id,
            QueryHistory.id == turn_id,
            QueryHistory.user_id == user_id,
        )
        return (await self.db.execute(statement)).scalar_one_or_none()

    async def own_ids_in(self, user_id: uuid.UUID, session_id: uuid.UUID) -> list[uuid.UUID]:
        """The user's turns in the session, oldest first."""
        statement = (
            select(QueryHistory.id)
            .where(
                QueryHistory.tenant_id == self.tenant_id,
                QueryHistory.user_id == user_id,
                QueryHistory.session_id == session_id,
            )
            .order_by(QueryHistory.created_at, QueryHistory.id)
        )
        return list((await self.db.execute(statement)).scalars())

    # --- a tenant's or a user's turns: the audit, the retention sweep, export and erasure ---

    def audited(self, filters: TurnFilters) -> Select[QueryHistory]:
        """The tenant's turns that pass the audit's `filters`."""
        statement = self.scoped()
        if filters.user_id is not None:
            statement = statement.where(QueryHistory.user_id == filters.user_id)
        if filters.session_id is not None:
            statement = statement.where(QueryHistory.session_id == filters.session_id)
        if filters.since is not None:
            statement = statement.where(QueryHistory.created_at >= filters.since)
        if filters.until is not None:
            statement = statement.where(QueryHistory.created_at < filters.until)
        if filters.composition is not None:
            statement = statement.where(QueryHistory.query_composition == filters.composition)
        if filters.min_quality is not None:
            statement = statement.where(_quality() >= filters.min_quality)
        if filters.max_quality is not None:
            statement = statement.where(_quality() <= filters.max_quality)
        if filters.truncated is not None:
            statement = statement.where(_truncated().is_(filters.truncated))
        if filters.feedback is not None:
            statement = statement.where(_has_feedback(filters.feedback))
        if filters.collection_id is not None:
            searched = {"access": {"collections": [str(filters.collection_id)]}}
            statement = statement.where(QueryHistory.context_metadata.contains(searched))
        return statement

    async def audit_page(
        self, filters: TurnFilters, *, limit: int, after: Cursor | None
    ) -> list[QueryHistory]:
        """Up to `limit + 1` turns, newest first (one extra tells whether another page exists)."""
        return await self.keyset_page(self.audited(filters), limit=limit, after=after)

    async def by_idempotency_key(
        self, user_id: uuid.UUID, key: str, within_seconds: int
    ) -> QueryHistory | None:
        """The user's newest turn recorded under the Redis key `key` (the first line of its
        `idempotency_key`) in the last `within_seconds`, unless it failed (a failed turn's key
        is released): a retry's turn when Redis forgot the key (ADR 0069). The key's
        expression is the index's, written out so the index serves."""
        statement = (
            select(QueryHistory)
            .where(
                QueryHistory.tenant_id == self.tenant_id,
                QueryHistory.user_id == user_id,
                QueryHistory.idempotency_key.is_not(None),
                QueryHistory.status != "failed",
                text("split_part(query_history.idempotency_key, chr(10), 1) = :key"),
                QueryHistory.created_at >= func.now() - timedelta(seconds=within_seconds),
            )
            .params(key=key)
            .order_by(QueryHistory.created_at.desc())
            .limit(1)
        )
        return (await self.db.execute(statement)).scalars().first()

    def _pending_of(self, user_id: uuid.UUID) -> Select[uuid.UUID]:
        return select(QueryHistory.id).where(
            QueryHistory.tenant_id == self.tenant_id,
            QueryHistory.user_id == user_id,
            QueryHistory.status == "pending",
        )

    async def pending_ids_of(self, user_id: uuid.UUID) -> list[uuid.UUID]:
        """The user's turns still running (or whose process died)."""
        return list((await self.db.execute(self._pending_of(user_id))).scalars())

    async def has_pending_of(self, user_id: uuid.UUID) -> bool:
        """Whether any turn of the user's is still pending."""
        return (await self.db.execute(self._pending_of(user_id).limit(1))).first() is not None

    async def delete_of(self, user_id: uuid.UUID) -> list[str]:
        """Delete the user's turns; their ids."""
        deleted = await self.db.execute(
            delete(QueryHistory)
            .where(QueryHistory.tenant_id == self.tenant_id, QueryHistory.user_id == user_id)
            .returning(QueryHistory.id)
        )
        return [str(t) for t in deleted.scalars()]

    async def delete_created_before(self, cutoff: datetime) -> list[tuple[uuid.UUID, int]]:
        """Delete the turns created before `cutoff`: how many each session lost."""
        rows = await self.db.execute(_PURGE_TURNS, {"tenant": self.tenant_id, "cutoff": cutoff})
        return [(row.session_id, int(row.turns)) for row in rows.all()]


def mentioned_in_turns(
    tenant_id: uuid.UUID, session_id: SQLColumnExpression[uuid.UUID], text: str
) -> ColumnElement[bool]:
    """Whether one of the turns of the session `session_id` (a column of the caller's query)
    has `text` in its question or answer, case-insensitively: the conversation search."""
    pattern = containing(text)
    return exists().where(
        QueryHistory.tenant_id == tenant_id,
        QueryHistory.session_id == session_id,
        or_(
            QueryHistory.user_query.ilike(pattern, escape="\\"),
            QueryHistory.answer.ilike(pattern, escape="\\"),
        ),
    )


_PURGE_TURNS = text(
    """
WITH gone AS (
    DELETE FROM query_history
    WHERE tenant_id = :tenant AND created_at < :cutoff
    RETURNING session_id
)
SELECT session_id, count(*) AS turns FROM gone GROUP BY session_id
"""
)


def _quality() -> Any:
    return QueryHistory.context_metadata["quality_score"].astext.cast(Float)


def _truncated() -> Any:
    return QueryHistory.context_metadata["truncation_applied"].astext.cast(Boolean)


def exported_turns(tenant_id: uuid.UUID, user_id: uuid.UUID) -> Select[*tuple[Any, ...]]:
    """The user's turns as the privacy export lists them (the query, not yet run)."""
    return select(
        QueryHistory.id,
        QueryHistory.session_id,
        QueryHistory.user_query,
        QueryHistory.answer,
        QueryHistory.status,
        QueryHistory.query_composition,
        QueryHistory.context_metadata,
        QueryHistory.attachment_ids,
        QueryHistory.model,
        QueryHistory.prompt_tokens,
        QueryHistory.completion_tokens,
        QueryHistory.latency_ms,
        QueryHistory.created_at,
        QueryHistory.completed_at,
    ).where(QueryHistory.tenant_id == tenant_id, QueryHistory.user_id == user_id)


def _has_feedback(value: str) -> ColumnElement[bool]:
    """The turn has feedback of `value` ("any": of either value)."""
    given = exists().where(
        TurnFeedback.tenant_id == QueryHistory.tenant_id,
        TurnFeedback.turn_id == QueryHistory.id,
    )
    return given.where(TurnFeedback.value == value) if value != "any" else given
