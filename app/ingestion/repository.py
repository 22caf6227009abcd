"""The ingestion pipeline's SQL, for several documents of one tenant at a time.

Concurrent ingestions share their transactions (see `pipeline`): claiming ten documents or
indexing their chunks is one statement each, not ten, and the statement trigger that keeps
the lexical statistics runs once for the lot.
"""

from __future__ import annotations

import uuid
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pgvector.sqlalchemy import Vector
from sqlalchemy import Integer, Text, any_, bindparam, cast, delete, func, insert, select, update
from sqlalchemy.dialects.postgresql import ARRAY, REAL, UUID
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.elements import Grouping

from app.models import Attachment, AttachmentChunk, KbChunk, KbDocument

Kind = Literal["kb", "attachment"]

ROWS_PER_INSERT = 1000
"""Chunks per INSERT: encoding a statement's parameters is one uninterrupted step of the
event loop (a Python float made and encoded per vector component), and its buffers are
held until it is sent. A 24 MB document's 17,800 chunks in one statement stalled the loop
for seconds."""


@dataclass(frozen=True)
class NewChunk:
    parent_id: uuid.UUID
    ordinal: int
    text: str
    tokens: int
    embedding: Sequence[float]


def _array(name: str, element: Any) -> Any:
    return bindparam(name, type_=ARRAY(element))  # sent typed ($n::type[]) by asyncpg


def _ids(values: Sequence[uuid.UUID]) -> Any:
    return any_(bindparam("ids", list(values), type_=ARRAY(UUID(as_uuid=True))))


class IngestionRepository:
    def __init__(self, session: AsyncSession, kind: Kind, tenant_id: uuid.UUID) -> None:
        self.session = session
        self.tenant_id = tenant_id
        self.model: Any = KbDocument if kind == "kb" else Attachment
        self.chunk_model: Any = KbChunk if kind == "kb" else AttachmentChunk
        self.parent: Any = KbChunk.document_id if kind == "kb" else AttachmentChunk.attachment_id

    async def claim(self, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, tuple[bytes | None, str]]:
        """Mark the documents `processing`; each one still there, with its file and type."""
        model = self.model
        rows = await self.session.execute(
            update(model)
            .where(model.tenant_id == self.tenant_id, model.id == _ids(ids))
            .values(status="processing", progress=0.05, error=None)
            .returning(model.id, model.source, model.content_type)
            .execution_options(synchronize_session=False)
        )
        return {oid: (source, content_type) for oid, source, content_type in rows}

    async def lock_present(self, ids: Sequence[uuid.UUID]) -> list[uuid.UUID]:
        """Lock the documents still there (in id order: concurrent writers queue, never
        deadlock), so none is deleted between indexing its chunks and marking it ready."""
        model = self.model
        rows = await self.session.scalars(
            select(model.id)
            .where(model.tenant_id == self.tenant_id, model.id == _ids(ids))
            .order_by(model.id)
            .with_for_update()
        )
        return list(rows)

    async def replace_chunks(self, ids: Sequence[uuid.UUID], chunks: Sequence[NewChunk]) -> None:
        """Whatever an earlier attempt wrote goes; the new chunks come in one INSERT per
        `ROWS_PER_INSERT` (not executemany, which would fire the statistics trigger per row)."""
        chunk_model = self.chunk_model
        await self.session.execute(
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
                _array("texts", Text()),
                _array("tokens", Integer()),
            )
            .table_valued("parent", "ordinal", "text", "tokens", with_ordinality="n")
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
            columns.c.text,
            columns.c.tokens,
            cast(vector, Vector()),
        )
        names = ["tenant_id", "id", self.parent.key, "ordinal", "text", "token_count", "embedding"]
        statement = insert(table).from_select([table.c[name] for name in names], rows)
        for start in range(0, len(chunks), ROWS_PER_INSERT):
            part = chunks[start : start + ROWS_PER_INSERT]
            embeddings = array("f")
            for chunk in part:
                embeddings.extend(chunk.embedding)
            await self.session.execute(
                statement,
                {
                    "tenant_id": self.tenant_id,
                    "parents": [c.parent_id for c in part],
                    "ordinals": [c.ordinal for c in part],
                    "texts": [c.text for c in part],
                    "tokens": [c.tokens for c in part],
                    "embeddings": embeddings,
                },
            )

    async def update_each(self, values: list[dict[str, Any]]) -> None:
        """One UPDATE per document (`id` in each dict), sent together as one executemany."""
        table = self.model.__table__
        columns = {key for row in values for key in row if key != "id"}
        await self.session.execute(
            table.update()
            .where(table.c.tenant_id == self.tenant_id, table.c.id == bindparam("oid"))
            .values({column: bindparam(f"v_{column}") for column in columns}),
            [{"oid": row["id"], **{f"v_{c}": row[c] for c in columns}} for row in values],
        )

    async def set(self, oid: uuid.UUID, **values: Any) -> None:
        model = self.model
        await self.session.execute(
            update(model)
            .where(model.tenant_id == self.tenant_id, model.id == oid)
            .values(**values)
            .execution_options(synchronize_session=False)
        )
