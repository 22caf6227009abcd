"""SQL for the embedding space: the vector columns' dimension, the model on record, and the
shadow columns a reindex fills before it switches to them."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    ColumnElement,
    TableClause,
    bindparam,
    column,
    delete,
    func,
    literal,
    select,
    text,
    update,
)
from sqlalchemy import table as sa_table
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from app.models import EmbeddingSpace


async def vector_column_dimension(db: AsyncSession) -> int | None:
    """The dimension the knowledge base's vector column was migrated with, if it exists."""
    dimension = await db.scalar(
        text(
            "SELECT atttypmod FROM pg_attribute "
            "WHERE attrelid = 'kb_chunks'::regclass AND attname = 'embedding'"
        )
    )
    return None if dimension is None else int(dimension)


async def record_space(db: AsyncSession, name: str, model: str, dimension: int) -> EmbeddingSpace:
    """Record the space's model and dimension unless one is recorded; the record either way."""
    await db.execute(
        pg_insert(EmbeddingSpace)
        .values(name=name, model=model, dimension=dimension)
        .on_conflict_do_nothing()
    )
    recorded = await db.scalar(select(EmbeddingSpace).where(EmbeddingSpace.name == name))
    assert recorded is not None
    return recorded


# --- Re-embedding into a shadow column (`threadline reindex`, app/embeddings/reindex.py) ---
# Every table holding vectors of the space, with what its rows embed: (title, text).
EMBEDDED_TABLES = {
    "kb_chunks": ("title", "text"),
    "attachment_chunks": ("title", "text"),
    "faqs": ("''", "question"),
}
INDEXED_TABLES = ("kb_chunks", "attachment_chunks")  # with an HNSW index on `embedding`
SHADOW = "embedding_next"
NEXT = "next"  # the embedding_space row of a reindex under way


async def next_space(db: AsyncSession) -> EmbeddingSpace | None:
    """The space a reindex under way is building, if any."""
    return await db.scalar(select(EmbeddingSpace).where(EmbeddingSpace.name == NEXT))


async def recorded_space(db: AsyncSession, name: str = "default") -> EmbeddingSpace | None:
    """The space's record (model and dimension), if one was made."""
    return await db.scalar(select(EmbeddingSpace).where(EmbeddingSpace.name == name))


async def recorded_model(db: AsyncSession, name: str = "default") -> str | None:
    """The model on record for a space (one indexed read)."""
    return await db.scalar(select(EmbeddingSpace.model).where(EmbeddingSpace.name == name))


async def start_shadow(db: AsyncSession, model: str, dimension: int) -> bool:
    """Prepare the shadow columns for `model`: kept (a resumed run) when they were started for
    the same model and dimension, else made anew. Whether an earlier run is resumed."""
    current = await next_space(db)
    if current is not None and (current.model, current.dimension) == (model, dimension):
        return True
    for table in EMBEDDED_TABLES:
        await db.execute(text(f"ALTER TABLE {table} DROP COLUMN IF EXISTS {SHADOW}"))
        await db.execute(text(f"ALTER TABLE {table} ADD COLUMN {SHADOW} vector({int(dimension)})"))
    await db.execute(delete(EmbeddingSpace).where(EmbeddingSpace.name == NEXT))
    db.add(EmbeddingSpace(name=NEXT, model=model, dimension=dimension))
    await db.flush()
    return False


async def tenant_ids(db: AsyncSession) -> list[uuid.UUID]:
    """Every tenant, through the maintenance door (migration 0011)."""
    await db.execute(text("SELECT set_config('threadline.maintenance', 'on', true)"))
    rows = await db.scalars(text("SELECT id FROM tenants ORDER BY id"))
    return list(rows)


def _embedded(table: str) -> TableClause:
    """`table` as a statement builder sees it: the columns a reindex reads and writes."""
    title, body = EMBEDDED_TABLES[table]
    columns = {"id", "tenant_id", SHADOW, body} | ({title} if title != "''" else set())
    return sa_table(table, *(column(name) for name in sorted(columns)))


def _scoped(embedded: TableClause) -> ColumnElement[bool]:
    """The rows of the tenant the transaction is scoped to (RLS checks it again)."""
    return embedded.c.tenant_id == func.threadline_current_tenant()


async def count_rows(db: AsyncSession, table: str, *, pending: bool) -> int:
    """Rows of the scoped tenant in `table`: all, or only those without a shadow vector."""
    embedded = _embedded(table)
    statement = select(func.count()).select_from(embedded).where(_scoped(embedded))
    if pending:
        statement = statement.where(embedded.c[SHADOW].is_(None))
    return int(await db.scalar(statement) or 0)


async def pending_rows(
    db: AsyncSession, table: str, limit: int, after: Any = None
) -> list[tuple[Any, str, str]]:
    """Up to `limit` rows of the scoped tenant still without a shadow vector, in id order
    (after `after`: a walk through the primary key, not a scan per batch): id, title, text."""
    title, body = EMBEDDED_TABLES[table]
    embedded = _embedded(table)
    statement = (
        select(
            embedded.c.id,
            literal("") if title == "''" else embedded.c[title],
            embedded.c[body],
        )
        .where(_scoped(embedded), embedded.c[SHADOW].is_(None))
        .order_by(embedded.c.id)
        .limit(limit)
    )
    if after is not None:
        statement = statement.where(embedded.c.id > after)
    rows = await db.execute(statement)
    return [(row[0], row[1], row[2]) for row in rows]


async def write_shadow(
    db: AsyncSession, table: str, ids: Sequence[Any], vectors: Sequence[Sequence[float]]
) -> None:
    """Store the shadow vectors of these rows of the scoped tenant."""
    embedded = _embedded(table)
    await db.execute(
        update(embedded)
        .where(_scoped(embedded), embedded.c.id == bindparam("row_id"))
        .values({SHADOW: bindparam("vector", type_=Vector())}),
        [{"row_id": i, "vector": list(v)} for i, v in zip(ids, vectors, strict=True)],
    )


async def build_shadow_indexes(engine: AsyncEngine) -> None:
    """The HNSW indexes of the shadow columns, built without blocking writers (CONCURRENTLY:
    each statement in its own autocommit transaction)."""
    async with engine.connect() as connection:
        autocommit = await connection.execution_options(isolation_level="AUTOCOMMIT")
        for table in INDEXED_TABLES:
            await autocommit.execute(
                text(
                    f"CREATE INDEX CONCURRENTLY IF NOT EXISTS ix_{table}_{SHADOW}_hnsw "
                    f"ON {table} USING hnsw ({SHADOW} vector_cosine_ops) "
                    "WITH (m = 16, ef_construction = 64)"
                )
            )


async def lock_writers(db: AsyncSession) -> None:
    """Hold off writes to the embedded tables (reads go on) until the transaction ends."""
    tables = ", ".join(EMBEDDED_TABLES)
    await db.execute(text(f"LOCK TABLE {tables} IN SHARE ROW EXCLUSIVE MODE"))


async def switch_to_shadow(db: AsyncSession, model: str, dimension: int) -> None:
    """Make the complete shadow vectors the space's vectors and record the new model; the old
    vectors and their indexes are dropped. Takes each table's exclusive lock briefly."""
    for table in EMBEDDED_TABLES:
        await db.execute(text(f"ALTER TABLE {table} DROP COLUMN embedding"))
        await db.execute(text(f"ALTER TABLE {table} RENAME COLUMN {SHADOW} TO embedding"))
    for table in INDEXED_TABLES:
        await db.execute(
            text(f"ALTER INDEX ix_{table}_{SHADOW}_hnsw RENAME TO ix_{table}_embedding_hnsw")
        )
    await db.execute(text("ALTER TABLE faqs ALTER COLUMN embedding SET NOT NULL"))
    await db.execute(
        update(EmbeddingSpace)
        .where(EmbeddingSpace.name == "default")
        .values(model=model, dimension=dimension)
    )
    await db.execute(delete(EmbeddingSpace).where(EmbeddingSpace.name == NEXT))
