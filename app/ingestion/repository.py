"""The ingestion pipeline's SQL, for several documents of one tenant at a time.

Concurrent ingestions share their transactions (see `pipeline`): claiming ten documents or
indexing their chunks is one statement each, not ten, and the statement trigger that keeps
the lexical statistics runs once for the lot.

Over 300 lines: every statement of the pipeline (claim, lease, store, fail, recover)
for both kinds of document; one place, so each batch's statement count stays visible.

A knowledge-base document's every status write records an event (`kb_document_events`,
ADR 0088) in the same statement: the UPDATE runs in a CTE and the INSERT of the events
reads what it returned, so there is no change without its event nor an event without its
change, and no statement more per batch.
"""

from __future__ import annotations

import json
import uuid
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    Integer,
    Interval,
    Text,
    and_,
    any_,
    bindparam,
    case,
    cast,
    delete,
    func,
    insert,
    literal,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, REAL, UUID
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.dml import Insert, Update
from sqlalchemy.sql.elements import Grouping
from sqlalchemy.sql.selectable import ExecutableReturnsRows

from app.models import Attachment, AttachmentChunk, KbChunk, KbDocument, KbDocumentEvent

Kind = Literal["kb", "attachment"]

ROWS_PER_INSERT = 1000
"""Chunks per INSERT: encoding a statement's parameters is one uninterrupted step of the
event loop (a Python float made and encoded per vector component), and its buffers are
held until it is sent. A 24 MB document's 17,800 chunks in one statement stalled the loop
for seconds."""


@dataclass(frozen=True)
class NewChunk:
    """One chunk to insert, with its embedding."""

    parent_id: uuid.UUID
    ordinal: int
    title: str
    """The parent's title, indexed with the chunk (full text, weight 'A')."""
    text: str
    tokens: int
    embedding: Sequence[float]
    location: Mapping[str, Any] | None = None
    """Where the chunk is in its document (None: nowhere in particular)."""


def _array(name: str, element: Any) -> Any:
    return bindparam(name, type_=ARRAY(element))  # sent typed ($n::type[]) by asyncpg


def _ids(values: Sequence[uuid.UUID]) -> Any:
    return any_(bindparam("ids", list(values), type_=ARRAY(UUID(as_uuid=True))))


def _seconds(name: str, seconds: float) -> Any:
    return bindparam(name, timedelta(seconds=seconds), type_=Interval())


def _lapsed(model: Any) -> Any:
    """A claim nobody renewed in time (or a row claimed before leases existed)."""
    return or_(model.lease_expires_at.is_(None), model.lease_expires_at < func.clock_timestamp())


def due(model: Any, pending_grace: float) -> Any:
    """Documents whose ingestion was lost: `pending` with no claim for longer than the grace
    (its job vanished with a process or a broker), or `processing` under a lapsed lease (its
    process died or hung)."""
    return and_(
        model.status.in_(("pending", "processing")),  # the partial index's predicate
        or_(
            and_(
                model.status == "pending",
                model.updated_at < func.clock_timestamp() - _seconds("grace", pending_grace),
            ),
            and_(model.status == "processing", _lapsed(model)),
        ),
    )


CLEARED_CLAIM: dict[str, Any] = {"claimed_by": None, "lease_expires_at": None, "attempts": 0}
"""A document's claim columns once it is ready or failed: nobody holds it, nothing counts."""

EVENT_COLUMNS = ("tenant_id", "id", "document_id", "status", "detail")
_WRITTEN = ("tenant_id", "id", "status", "error", "chunk_count", "attempts")
"""What a status write returns to its event: the document and the columns its detail reads."""

Detail = Callable[[Any], Any]
"""The event's detail from the written row (the CTE's columns)."""


def status_detail(row: Any) -> Any:
    """What an event says by default: a failure's error, a ready document's chunk count, the
    attempt of a claimed one."""
    chunks = cast(row.chunk_count, Text) + case(
        (row.chunk_count == 1, literal(" chunk")), else_=literal(" chunks")
    )
    return case(
        (row.status == "failed", row.error),
        (row.status == "ready", chunks),
        (row.status == "processing", literal("attempt ") + cast(row.attempts, Text)),
        else_=None,
    )


def _events_of(written: Any, detail: Detail) -> Insert:
    rows = select(
        written.c.tenant_id,
        func.gen_random_uuid(),
        written.c.id,
        written.c.status,
        detail(written.c),
    )
    # The Core table, not the entity: an executemany of an ORM insert takes the bulk path.
    events = KbDocumentEvent.metadata.tables[KbDocumentEvent.__tablename__]
    return insert(events).from_select(list(EVENT_COLUMNS), rows)


def with_events(
    write: Insert | Update,
    detail: Detail,
    returning: Sequence[str] = (),
    unchanged: Sequence[str] = (),
) -> ExecutableReturnsRows:
    """`write` (an INSERT or UPDATE of `kb_documents`) and one event per row it wrote, as one
    statement; returning the columns named in `returning` of the written rows, then those in
    `unchanged`, read from the table (nothing when none is named: then the statement is the
    INSERT of the events, which an executemany can send).

    `unchanged`: columns the write does not set, such as a claim's file: read by the outer
    query (which sees the rows as they were before the statement) instead of passing through
    the CTE, which would hold every claimed file, up to 25 MB each, in a work-memory store
    that spills to disk."""
    table = KbDocument.__table__
    names = list(dict.fromkeys([*_WRITTEN, *returning]))
    written = write.returning(*(table.c[name] for name in names)).cte("written")
    if not (returning or unchanged):
        return _events_of(written, detail).add_cte(written)
    columns = [written.c[name] for name in returning] + [table.c[name] for name in unchanged]
    statement = select(*columns).select_from(written)
    if unchanged:
        same_row = and_(table.c.tenant_id == written.c.tenant_id, table.c.id == written.c.id)
        statement = statement.join(table, same_row)
    return statement.add_cte(_events_of(written, detail).cte("logged"))


def _handed_back(row: Any) -> Any:
    return literal("handed back by a stopping process, to be queued again")


def _requeued(row: Any) -> Any:
    lost = literal("queued again: the process ingesting it stopped or the job was lost")
    return case((row.status == "failed", row.error), else_=lost)


class IngestionRepository:
    """The SQL of ingestion, for documents or attachments of one tenant."""

    def __init__(self, db: AsyncSession, kind: Kind, tenant_id: uuid.UUID) -> None:
        self.db = db
        self.tenant_id = tenant_id
        self.model: Any = KbDocument if kind == "kb" else Attachment
        self.chunk_model: Any = KbChunk if kind == "kb" else AttachmentChunk
        self.parent: Any = KbChunk.document_id if kind == "kb" else AttachmentChunk.attachment_id
        self.title: Any = KbDocument.title if kind == "kb" else Attachment.filename

    def _write(
        self,
        write: Update,
        returning: Sequence[str] = (),
        detail: Detail = status_detail,
        unchanged: Sequence[str] = (),
    ) -> ExecutableReturnsRows:
        """A status write: a knowledge-base document's with its events (`with_events`); an
        attachment's has no history (it lives and dies with its conversation)."""
        if self.model is KbDocument:
            statement = with_events(write, detail, returning, unchanged)
        elif returning or unchanged:
            table = self.model.__table__
            statement = write.returning(*(table.c[n] for n in (*returning, *unchanged)))
        else:
            statement = write
        return statement.execution_options(synchronize_session=False)

    async def claim(
        self, ids: Sequence[uuid.UUID], owner: str, lease_seconds: float, max_attempts: int
    ) -> dict[uuid.UUID, tuple[bytes | None, str, str | None]]:
        """Mark the documents `processing` under `owner`'s lease; each one claimed, with its
        file, type and title (an attachment's: its file name). Claimable: `pending`, already
        `owner`'s (a retry), or `processing` under a lapsed lease with attempts left. A
        document that is ready, failed, gone or in another live process's hands is not
        returned."""
        model = self.model
        mine = model.claimed_by == owner
        claimable = or_(
            model.status == "pending",
            and_(
                model.status == "processing",
                or_(mine, and_(_lapsed(model), model.attempts < max_attempts)),
            ),
        )
        write = (
            update(model)
            .where(model.tenant_id == self.tenant_id, model.id == _ids(ids), claimable)
            .values(
                status="processing",
                progress=0.05,
                error=None,
                claimed_by=owner,
                lease_expires_at=func.clock_timestamp() + _seconds("lease", lease_seconds),
                # A retry of this owner is the same run; any other claim is a new one.
                attempts=model.attempts + case((mine, 0), else_=1),
            )
        )
        rows = await self.db.execute(
            self._write(write, ("id",), unchanged=("source", "content_type", self.title.key))
        )
        return {oid: (source, content_type, title) for oid, source, content_type, title in rows}

    async def renew(
        self, ids: Sequence[uuid.UUID], owner: str, lease_seconds: float
    ) -> set[uuid.UUID]:
        """Extend `owner`'s leases on these documents; the ids it still holds."""
        model = self.model
        rows = await self.db.scalars(
            update(model)
            .where(
                model.tenant_id == self.tenant_id,
                model.id == _ids(ids),
                model.status == "processing",
                model.claimed_by == owner,
            )
            .values(lease_expires_at=func.clock_timestamp() + _seconds("lease", lease_seconds))
            .returning(model.id)
            .execution_options(synchronize_session=False)
        )
        return set(rows)

    async def in_flight(self, ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
        """Those of these documents still pending or processing (queued again, or claimed
        by another process)."""
        model = self.model
        rows = await self.db.scalars(
            select(model.id).where(
                model.tenant_id == self.tenant_id,
                model.id == _ids(ids),
                model.status.in_(("pending", "processing")),
            )
        )
        return set(rows)

    async def progress(self, oid: uuid.UUID, owner: str, value: float) -> str:
        """Record `owner`'s progress on a document it holds: `held`; else `gone` (deleted
        meanwhile) or `taken` (another process holds it now, or it is no longer in
        flight). The embedding loop writes it between batches, so a deleted document stops
        there instead of being embedded to the end (issue 33)."""
        model = self.model
        written = await self.db.scalar(
            update(model)
            .where(
                model.tenant_id == self.tenant_id,
                model.id == oid,
                model.claimed_by == owner,
                model.status == "processing",
            )
            .values(progress=value)
            .returning(model.id)
            .execution_options(synchronize_session=False)
        )
        if written is not None:
            return "held"
        there = await self.db.scalar(
            select(model.id).where(model.tenant_id == self.tenant_id, model.id == oid)
        )
        return "taken" if there is not None else "gone"

    async def lock_present(self, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, str | None]:
        """Lock the documents still there (in id order: concurrent writers queue, never
        deadlock), so none is deleted between indexing its chunks and marking it ready;
        each with the process that holds its claim now."""
        model = self.model
        rows = await self.db.execute(
            select(model.id, model.claimed_by)
            .where(model.tenant_id == self.tenant_id, model.id == _ids(ids))
            .order_by(model.id)
            .with_for_update()
        )
        return {oid: owner for oid, owner in rows}

    async def fail(self, oid: uuid.UUID, owner: str, error: str) -> None:
        """Record a failure, unless another process has taken the document over. Only the
        holder of the claim writes it: a document requeued by the recovery (unclaimed again)
        or already stored by another process is not this job's to fail."""
        model = self.model
        write = (
            update(model)
            .where(
                model.tenant_id == self.tenant_id,
                model.id == oid,
                model.claimed_by == owner,
                model.status == "processing",
            )
            .values(status="failed", error=error, progress=1.0, **CLEARED_CLAIM)
        )
        await self.db.execute(self._write(write))

    async def hand_off(self, ids: Sequence[uuid.UUID], owner: str) -> int:
        """A stopping process gives back what it held: its claims (the attempt it counted
        undone: a shutdown is not the document's fault) and the `pending` documents it had
        jobs for. Both become `processing` with no claim, which the recovery of any process
        queues again at its next scan (a lapsed lease), not a lease or a pending grace later.
        The number of documents handed back."""
        model = self.model
        mine = and_(model.claimed_by == owner, model.status == "processing")
        queued = and_(model.id == _ids(ids), model.status == "pending", model.claimed_by.is_(None))
        write = (
            update(model)
            .where(model.tenant_id == self.tenant_id, or_(mine, queued))
            .values(
                status="processing",
                claimed_by=None,
                lease_expires_at=None,
                attempts=case((mine, func.greatest(model.attempts - 1, 0)), else_=model.attempts),
            )
        )
        rows = await self.db.scalars(self._write(write, ("id",), detail=_handed_back))
        return len(list(rows))

    async def requeue(
        self, ids: Sequence[uuid.UUID], pending_grace: float, max_attempts: int
    ) -> dict[uuid.UUID, str]:
        """Put lost documents back in the queue (`pending`, unclaimed, the grace restarted),
        or, for one interrupted `max_attempts` times, end it `failed` with a reason. Only
        documents still lost are touched, so of several processes scanning at once, one
        re-queues each. Returns each touched document's new status."""
        model = self.model
        exhausted = and_(model.status == "processing", model.attempts >= max_attempts)
        message = (
            literal("Ingestion was interrupted ")
            + cast(model.attempts, Text)
            + literal(
                " times (the process running it stopped each time); upload it again to retry."
            )
        )
        write = (
            update(model)
            .where(model.tenant_id == self.tenant_id, model.id == _ids(ids))
            .where(due(model, pending_grace))
            .values(
                status=case((exhausted, "failed"), else_="pending"),
                error=case((exhausted, message), else_=None),
                progress=case((exhausted, 1.0), else_=0.0),
                attempts=case((exhausted, 0), else_=model.attempts),
                claimed_by=None,
                lease_expires_at=None,
            )
        )
        rows = await self.db.execute(self._write(write, ("id", "status"), detail=_requeued))
        return {oid: status for oid, status in rows}

    async def replace_chunks(self, ids: Sequence[uuid.UUID], chunks: Sequence[NewChunk]) -> None:
        """Whatever an earlier attempt wrote goes; the new chunks come in one INSERT per
        `ROWS_PER_INSERT` (not executemany, which would fire the statistics trigger per row)."""
        chunk_model = self.chunk_model
        await self.db.execute(
            delete(chunk_model)
            .where(chunk_model.tenant_id == self.tenant_id, self.parent == _ids(ids))
            .execution_options(synchronize_session=False)
        )
        if not chunks:
            return
        # Columns as arrays, unnested by the server: one statement text whatever the number
        # of chunks (prepared once), and no per-value bind parameter for Python to build.
        # The vectors go as one flat binary float4 array, each row's slice cast to `vector`:
        # formatting 17,000 vectors as text took seconds of the event loop.
        columns = (
            func.unnest(
                _array("parents", UUID(as_uuid=True)),
                _array("ordinals", Integer()),
                _array("titles", Text()),
                _array("texts", Text()),
                _array("tokens", Integer()),
                _array("locations", Text()),
            )
            .table_valued(
                "parent", "ordinal", "title", "text", "tokens", "location", with_ordinality="n"
            )
            .render_derived()
        )
        dimension = len(chunks[0].embedding)
        flat = Grouping(_array("embeddings", REAL()))  # ($n::REAL[])[a:b], not $n::REAL[][a:b]
        vector = flat[(columns.c.n - 1) * dimension + 1 : columns.c.n * dimension]
        table = chunk_model.__table__
        rows = select(
            bindparam("tenant_id", type_=UUID(as_uuid=True)),
            func.gen_random_uuid(),
            columns.c.parent,
            columns.c.ordinal,
            columns.c.title,
            columns.c.text,
            columns.c.tokens,
            cast(vector, Vector()),
            cast(columns.c.location, JSONB()),
        )
        names = [
            *("tenant_id", "id", self.parent.key, "ordinal", "title", "text", "token_count"),
            "embedding",
            "location",
        ]
        statement = insert(table).from_select([table.c[name] for name in names], rows)
        for start in range(0, len(chunks), ROWS_PER_INSERT):
            part = chunks[start : start + ROWS_PER_INSERT]
            embeddings = array("f")
            for chunk in part:
                embeddings.extend(chunk.embedding)
            await self.db.execute(
                statement,
                {
                    "tenant_id": self.tenant_id,
                    "parents": [c.parent_id for c in part],
                    "ordinals": [c.ordinal for c in part],
                    "titles": [c.title for c in part],
                    "texts": [c.text for c in part],
                    "tokens": [c.tokens for c in part],
                    # JSON text, cast by the server: NULL for a chunk with no location.
                    "locations": [
                        json.dumps(dict(c.location)) if c.location else None for c in part
                    ],
                    "embeddings": embeddings,
                },
            )

    async def update_each(self, values: list[dict[str, Any]]) -> None:
        """One UPDATE per document (`id` in each dict), sent together as one executemany."""
        table = self.model.__table__
        columns = {key for row in values for key in row if key != "id"}
        write = (
            table.update()
            .where(table.c.tenant_id == self.tenant_id, table.c.id == bindparam("oid"))
            .values({column: bindparam(f"v_{column}") for column in columns})
        )
        await self.db.execute(
            self._write(write) if "status" in columns else write,
            [{"oid": row["id"], **{f"v_{c}": row[c] for c in columns}} for row in values],
        )


async def lost_documents(
    db: AsyncSession, pending_grace: float, limit: int
) -> list[tuple[Kind, uuid.UUID, uuid.UUID]]:
    """(kind, tenant, id) of lost ingestions in every tenant, oldest first. The maintenance
    door (migration 0017) shows in-flight rows of all tenants; it is closed again at once."""
    await db.execute(text("SELECT set_config('threadline.maintenance', 'on', true)"))
    found: list[tuple[Kind, uuid.UUID, uuid.UUID]] = []
    kinds: tuple[tuple[Kind, Any], ...] = (("attachment", Attachment), ("kb", KbDocument))
    for kind, model in kinds:  # attachments first: a user is waiting for them
        rows = await db.execute(
            select(model.tenant_id, model.id)
            .where(due(model, pending_grace))
            .order_by(model.updated_at)
            .limit(limit - len(found))
        )
        found += [(kind, tenant, oid) for tenant, oid in rows]
        if len(found) >= limit:
            break
    await db.execute(text("SELECT set_config('threadline.maintenance', '', true)"))
    return found
