"""BM25 read from the inverted index (`kb_term_postings`, migration 0021) scores exactly what
BM25 over the chunks' own tsvectors scores; the index follows the chunks as documents come,
are re-ingested and go."""

from __future__ import annotations

import uuid

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import Float, bindparam, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.retrieval import repository as repository_module
from app.retrieval.repository import BM25_B, BM25_K1, SearchRepository
from tests.factories import make_knowledge_base

pytestmark = pytest.mark.committed

DOCUMENTS = [
    ("Night allowance", "Night shifts are paid a quarter more. Night work needs a rest day."),
    ("Travel", "Travel by train is refunded in second class; night trains in a couchette."),
    ("Expenses", "Receipts are filed within a month of the purchase, paid back monthly."),
    ("Leave", "Staff take twenty-five days of leave each year, more after five years."),
    ("Laptops", "Each new starter receives a laptop on the first day, returned when leaving."),
    ("Canteen", "Lunch is served from noon until two; the night shift gets a paid meal."),
]

# BM25 as the lexical leg defined it before the index: every matching chunk's whole tsvector
# read for the question's lexemes. The index must give the same scores.
_REFERENCE = text(
    """
    WITH terms AS (
      SELECT DISTINCT t.lexeme
      FROM unnest(tsvector_to_array(to_tsvector('english', :query))) AS t(lexeme)
    ),
    corpus AS (
      SELECT chunks::float8 AS n, total_length::float8 / chunks AS avgdl
      FROM kb_corpus_stats WHERE tenant_id = :tenant
    ),
    idf AS (
      SELECT s.lexeme, ln(1 + (corpus.n - s.df + 0.5) / (s.df + 0.5)) AS idf
      FROM kb_term_stats s JOIN terms USING (lexeme) CROSS JOIN corpus
      WHERE s.tenant_id = :tenant
    )
    SELECT c.id, sum(idf.idf * u.tf * (:k1 + 1)
                     / (u.tf + :k1 * (1 - :b + :b * length(c.tsv) / corpus.avgdl))) AS score
    FROM kb_chunks c
    CROSS JOIN LATERAL (
      SELECT t.lexeme, cardinality(t.positions)
               + (:title_weight - 1) * cardinality(array_positions(t.weights, 'A')) AS tf
      FROM unnest(c.tsv) AS t(lexeme, positions, weights)
    ) AS u
    JOIN idf ON idf.lexeme = u.lexeme
    CROSS JOIN corpus
    WHERE c.tenant_id = :tenant
    GROUP BY c.id
    """
).bindparams(*(bindparam(name, type_=Float) for name in ("k1", "b", "title_weight")))


async def _reference(
    db: AsyncSession, tenant_id: uuid.UUID, query: str, title_weight: float
) -> dict[str, float]:
    rows = await db.execute(
        _REFERENCE,
        {
            "tenant": tenant_id,
            "query": query,
            "k1": BM25_K1,
            "b": BM25_B,
            "title_weight": title_weight,
        },
    )
    return {str(row.id): float(row.score) for row in rows}


@pytest.mark.parametrize("title_weight", [1.0, 2.0])
async def test_scores_from_the_index_equal_bm25_over_the_chunks(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, title_weight: float
) -> None:
    tenant_id = await make_knowledge_base(app, client, db, DOCUMENTS)
    repository = SearchRepository(db, tenant_id)
    for query in ("night shift paid", "Is travel refunded?", "laptop on the first day", "zzz"):
        expected = await _reference(db, tenant_id, query, title_weight)
        hits = await repository.bm25(query, limit=None, title_weight=title_weight)
        assert {h.passage.id: h.passage.score for h in hits} == pytest.approx(expected, rel=1e-12)
        scores = [h.passage.score for h in hits]
        assert scores == sorted(scores, reverse=True)
    # "night" is in one document's title and said twice in its text: it comes first.
    best = await repository.bm25("night", limit=1, title_weight=title_weight)
    assert [h.passage.title for h in best] == ["Night allowance"]


async def test_the_index_follows_the_chunks(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant_id = await make_knowledge_base(app, client, db, DOCUMENTS)
    postings = text("SELECT count(*) FROM kb_term_postings WHERE tenant_id = :t")
    lexemes = text("SELECT coalesce(sum(length(tsv)), 0) FROM kb_chunks WHERE tenant_id = :t")
    assert await db.scalar(postings, {"t": tenant_id}) == await db.scalar(lexemes, {"t": tenant_id})
    assert await db.scalar(postings, {"t": tenant_id}) > 0
    repository = SearchRepository(db, tenant_id)
    travel = await db.scalar(
        text("SELECT id FROM kb_documents WHERE tenant_id = :t AND title = 'Travel'"),
        {"t": tenant_id},
    )
    assert travel is not None

    # Being re-ingested: its chunks are still there, but it is out of the results.
    await db.execute(
        text("UPDATE kb_documents SET status = 'pending' WHERE tenant_id = :t AND id = :d"),
        {"t": tenant_id, "d": travel},
    )
    found = await repository.bm25("night trains are paid", limit=None)
    assert found
    assert str(travel) not in {h.passage.source_id for h in found}

    # Its chunks deleted: their postings go in the same statement.
    await db.execute(
        text("DELETE FROM kb_chunks WHERE tenant_id = :t AND document_id = :d"),
        {"t": tenant_id, "d": travel},
    )
    assert await db.scalar(postings, {"t": tenant_id}) == await db.scalar(lexemes, {"t": tenant_id})
    assert (
        await db.scalar(
            text("SELECT count(*) FROM kb_term_postings WHERE tenant_id = :t AND document_id = :d"),
            {"t": tenant_id, "d": travel},
        )
        == 0
    )
    await db.rollback()


# "quokka" is in two long chunks, "wombat" in one short one, "zephyr" in four, three times in
# the shortest: with the words in at most a third of the chunks rare, "zephyr" is common.
PRUNING = [
    ("Alpha", "Zephyr, zephyr, zephyr."),
    ("Bravo", "A quokka " + "sat by the river bank watching boats drift past the old mill " * 2),
    ("Charlie", "A quokka " + "ran along the quiet beach under grey clouds near the harbour " * 2),
    ("Delta", "A zephyr crossed the valley."),
    ("Echo", "The zephyr cooled the garden."),
    ("Foxtrot", "Wombat zephyr tale."),
]


@pytest.mark.parametrize("rare_share", [0.0, 0.34, 1.0])
async def test_the_pruned_pass_finds_the_same_best_chunks(
    app: FastAPI,
    client: httpx.AsyncClient,
    db: AsyncSession,
    monkeypatch: pytest.MonkeyPatch,
    rare_share: float,
) -> None:
    # Which words count as rare decides what the pruned pass reads, never what it finds. At
    # a third: "zephyr quokka" — the two quokka chunks are the pruned pass's best two, but
    # the zephyr-only "Alpha" beats one of them: the bound must send it to the whole pass;
    # "zephyr wombat" — the pruned pass is enough, and its score must count "zephyr" too.
    monkeypatch.setattr(repository_module, "RARE_TERM_SHARE", rare_share)
    tenant_id = await make_knowledge_base(app, client, db, PRUNING)
    repository = SearchRepository(db, tenant_id)
    for query, limit in (("zephyr quokka", 2), ("zephyr wombat", 1), ("zephyr", 3)):
        expected = await _reference(db, tenant_id, query, 2.0)
        best = sorted(expected, key=lambda chunk: (-expected[chunk], chunk))[:limit]
        hits = await repository.bm25(query, limit=limit, title_weight=2.0)
        assert [h.passage.id for h in hits] == best, query
        assert [h.passage.score for h in hits] == pytest.approx([expected[c] for c in best])
    titles = [h.passage.title for h in await repository.bm25("zephyr quokka", limit=2)]
    assert titles[0] == "Alpha"
