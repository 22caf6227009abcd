"""A search narrowed to some collections is planned by what the caller may see (issue 30,
item 3; ADR 0095): the chunks of the visible collections decide exact scan or HNSW, and the
HNSW statement, whose collection filter no btree can serve, still returns only visible
chunks and never a short list."""

from __future__ import annotations

import uuid

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.db import restrict_to_collections, scope_to_tenant
from app.embeddings.hashing import HashingEmbedder
from app.models import KbCollection
from app.retrieval.hybrid import FusionSettings, HybridRetriever
from app.retrieval.repository import SearchRepository
from tests.chat_helpers import add_kb_document
from tests.factories import make_tenant

BOARD = [f"The board met on day {n} about the zephyr merger." for n in range(3)]
PUBLIC = [f"The cafeteria serves soup number {n} on Mondays." for n in range(5)]


async def _two_collections(db: AsyncSession) -> tuple[uuid.UUID, uuid.UUID]:
    """A tenant with 5 public chunks and 3 in a board collection; its id and the board's."""
    tenant = await make_tenant(db)
    board = KbCollection(tenant_id=tenant.id, id=uuid.uuid4(), name="Board", visibility="groups")
    db.add(board)
    await db.flush()
    for title, chunks, collection in (("Menu", PUBLIC, None), ("Minutes", BOARD, board.id)):
        document = await add_kb_document(db, tenant, title, chunks)
        # What ingestion records (app/ingestion/pipeline.py); the move takes the chunks along.
        await db.execute(
            text(
                "UPDATE kb_documents SET chunk_count = :n, "
                "collection_id = coalesce(:c, collection_id) WHERE id = :d"
            ),
            {"n": len(chunks), "c": collection, "d": document.id},
        )
    await db.commit()
    await scope_to_tenant(db, tenant.id)
    return tenant.id, board.id


async def test_a_narrowed_search_counts_only_the_chunks_it_may_see(db: AsyncSession) -> None:
    tenant, board = await _two_collections(db)

    whole, _ = await SearchRepository(db, tenant).prepare(ef_search=40)
    await restrict_to_collections(db, [board])
    narrowed, _ = await SearchRepository(db, tenant).prepare(ef_search=40)

    assert (whole, narrowed) == (len(PUBLIC) + len(BOARD), len(BOARD))


async def test_the_hnsw_search_of_a_narrowed_caller_returns_every_visible_chunk_and_no_other(
    db: AsyncSession,
) -> None:
    tenant, board = await _two_collections(db)
    await restrict_to_collections(db, [board])
    retriever = HybridRetriever(HashingEmbedder(), FusionSettings(exact_scan_max_chunks=0))

    for question in ("zephyr merger", "soup on Mondays"):
        async with db.begin_nested():
            (legs,) = await retriever.query_legs(db, tenant, [question], legs=("dense",))
        assert sorted(hit.passage.text for hit in legs["dense"]) == sorted(BOARD)
