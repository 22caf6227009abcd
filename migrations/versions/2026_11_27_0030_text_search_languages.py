"""Each chunk is analysed in its language: the tenant's, or its document's own (ADR 0076).

1. `kb_documents.language`: the document's own text-search configuration (given at upload),
   NULL when it follows its tenant's (`tenants.settings->>'language'`, default english).
2. `kb_chunks.language` and `attachment_chunks.language`: the configuration each chunk was
   analysed with, filled on insert by a row trigger (the document's, else the tenant's, else
   english: the pipeline's INSERT does not name it), and `tsv` computed with it
   (`to_tsvector(regconfig, text)` is immutable, so a stored generated column can read the
   column). Existing chunks were all analysed as english and say so; their vectors do not
   change (`tsv` is recomputed once, to the same values).
3. A statement trigger on UPDATE of kb_chunks keeps the BM25 term statistics (0010) and the
   inverted index (0021) in step when a chunk's vector changes (a tenant switching language
   re-analyses its chunks by updating `language`): one pass over the changed lexemes in
   (tenant, lexeme) order, as the insert and delete triggers lock them, so a rebuild and an
   ingestion queue on shared words instead of deadlocking. Rows whose vector did not change
   (a reindex writing embeddings) cost a join of the transition tables, nothing more.
4. `(tenant_id, language)` indexes: a search reads the languages a tenant's chunks are in
   with a few index probes (a skip scan, `app.retrieval.repository`), and the rebuild finds
   the chunks still to re-analyse.

Revision ID: 0030
Revises: 0029
Create Date: 2026-11-27
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision: str = "0030"
down_revision: str | None = "0029"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("kb_chunks", "attachment_chunks")
ANALYSED = (
    "setweight(to_tsvector(language, title), 'A') || setweight(to_tsvector(language, text), 'B')"
)
ENGLISH = (
    "setweight(to_tsvector('english', title), 'A') || setweight(to_tsvector('english', text), 'B')"
)

# The tenant's configuration: a built-in one named by its settings, else english. Read by
# the insert triggers and by the searches; an unknown name (never stored: the API checks it)
# falls back rather than failing an ingestion.
TENANT_CONFIG = """
    CREATE FUNCTION tenant_text_config(tenant uuid) RETURNS regconfig
    LANGUAGE sql STABLE AS $$
      SELECT coalesce(
        (SELECT c.oid::regconfig
         FROM tenants t
         JOIN pg_ts_config c
           ON c.cfgname = t.settings->>'language' AND c.cfgnamespace = 'pg_catalog'::regnamespace
         WHERE t.id = tenant),
        'english'::regconfig)
    $$
"""

KB_CHUNK_LANGUAGE = """
    CREATE FUNCTION kb_chunk_language() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.language IS NULL THEN
        NEW.language := coalesce(
          (SELECT d.language FROM kb_documents d
           WHERE d.tenant_id = NEW.tenant_id AND d.id = NEW.document_id),
          tenant_text_config(NEW.tenant_id));
      END IF;
      RETURN NEW;
    END $$
"""

ATTACHMENT_CHUNK_LANGUAGE = """
    CREATE FUNCTION attachment_chunk_language() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.language IS NULL THEN
        NEW.language := tenant_text_config(NEW.tenant_id);
      END IF;
      RETURN NEW;
    END $$
"""

# `changed`: the updated chunks whose vector differs, old and new side by side.
CHANGED = """
    removed o JOIN added a ON a.tenant_id = o.tenant_id AND a.id = o.id
    WHERE o.tsv IS DISTINCT FROM a.tsv
"""

KB_LEXICON_UPDATED = f"""
    CREATE FUNCTION kb_lexicon_updated() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      -- Document frequencies: one upsert of each touched lexeme's net change, in order.
      INSERT INTO kb_term_stats AS s (tenant_id, lexeme, df)
      SELECT tenant_id, lexeme, sum(n) FROM (
        SELECT o.tenant_id, l.lexeme, -1 AS n
        FROM {CHANGED.replace("WHERE", ", unnest(tsvector_to_array(o.tsv)) AS l(lexeme) WHERE")}
        UNION ALL
        SELECT a.tenant_id, l.lexeme, 1 AS n
        FROM {CHANGED.replace("WHERE", ", unnest(tsvector_to_array(a.tsv)) AS l(lexeme) WHERE")}
      ) AS d
      GROUP BY 1, 2
      HAVING sum(n) <> 0
      ORDER BY 1, 2
      ON CONFLICT (tenant_id, lexeme) DO UPDATE SET df = s.df + EXCLUDED.df;
      DELETE FROM kb_term_stats s
      USING (SELECT DISTINCT o.tenant_id, l.lexeme
             FROM {CHANGED.replace("WHERE", ", unnest(tsvector_to_array(o.tsv)) AS l(lexeme) WHERE")}
            ) AS r
      WHERE s.tenant_id = r.tenant_id AND s.lexeme = r.lexeme AND s.df <= 0;
      UPDATE kb_corpus_stats c SET total_length = c.total_length + r.delta
      FROM (SELECT a.tenant_id, sum(length(a.tsv) - length(o.tsv)) AS delta
            FROM {CHANGED} GROUP BY 1) AS r
      WHERE c.tenant_id = r.tenant_id;
      -- The changed chunks' postings: every one of them (the chunk's length changed too).
      DELETE FROM kb_term_postings p
      USING {CHANGED.replace("WHERE", "CROSS JOIN LATERAL unnest(tsvector_to_array(o.tsv)) AS l(lexeme) WHERE")}
        AND p.tenant_id = o.tenant_id AND p.lexeme = l.lexeme AND p.chunk_id = o.id;
      INSERT INTO kb_term_postings
        (tenant_id, lexeme, chunk_id, document_id, tf, title_tf, chunk_length)
      SELECT a.tenant_id, t.lexeme, a.id, a.document_id,
             cardinality(t.positions),
             coalesce(cardinality(array_positions(t.weights, 'A')), 0),
             length(a.tsv)
      FROM {CHANGED.replace("WHERE", "CROSS JOIN LATERAL unnest(a.tsv) AS t(lexeme, positions, weights) WHERE")};
      RETURN NULL;
    END $$
"""  # noqa: E501


def _set_tsv(table: str, expression: str) -> None:
    """Drop and add `tsv` again with `expression` (one rewrite of the table)."""
    if table == "attachment_chunks":
        op.drop_index(f"ix_{table}_tsv", table_name=table)
    op.drop_column(table, "tsv")
    op.add_column(table, sa.Column("tsv", pg.TSVECTOR, sa.Computed(expression, persisted=True)))
    if table == "attachment_chunks":
        op.create_index(f"ix_{table}_tsv", table, ["tsv"], postgresql_using="gin")


def upgrade() -> None:
    op.add_column("kb_documents", sa.Column("language", pg.REGCONFIG, nullable=True))
    for table in TABLES:
        # Existing chunks were analysed as english: the default fills them without a rewrite.
        op.add_column(
            table,
            sa.Column("language", pg.REGCONFIG, nullable=False, server_default="english"),
        )
        op.alter_column(table, "language", server_default=None)
        _set_tsv(table, ANALYSED)
        op.create_index(f"ix_{table}_language", table, ["tenant_id", "language"])
    op.execute(TENANT_CONFIG)
    op.execute(KB_CHUNK_LANGUAGE)
    op.execute(ATTACHMENT_CHUNK_LANGUAGE)
    op.execute(
        "CREATE TRIGGER kb_chunks_language BEFORE INSERT ON kb_chunks "
        "FOR EACH ROW EXECUTE FUNCTION kb_chunk_language()"
    )
    op.execute(
        "CREATE TRIGGER attachment_chunks_language BEFORE INSERT ON attachment_chunks "
        "FOR EACH ROW EXECUTE FUNCTION attachment_chunk_language()"
    )
    op.execute(KB_LEXICON_UPDATED)
    op.execute(
        "CREATE TRIGGER kb_chunks_lexicon_updated AFTER UPDATE ON kb_chunks "
        "REFERENCING OLD TABLE AS removed NEW TABLE AS added "
        "FOR EACH STATEMENT EXECUTE FUNCTION kb_lexicon_updated()"
    )


def _recount_lexicon() -> None:
    """Statistics and postings counted again from the (english again) vectors, as 0010 and
    0021 first counted them."""
    op.execute("DELETE FROM kb_term_postings")
    op.execute("DELETE FROM kb_term_stats")
    op.execute("DELETE FROM kb_corpus_stats")
    op.execute(
        """
        INSERT INTO kb_term_stats (tenant_id, lexeme, df)
        SELECT c.tenant_id, l.lexeme, count(*)
        FROM kb_chunks c, unnest(tsvector_to_array(c.tsv)) AS l(lexeme) GROUP BY 1, 2
        """
    )
    op.execute(
        "INSERT INTO kb_corpus_stats (tenant_id, chunks, total_length) "
        "SELECT tenant_id, count(*), coalesce(sum(length(tsv)), 0) FROM kb_chunks GROUP BY 1"
    )
    op.execute(
        """
        INSERT INTO kb_term_postings
          (tenant_id, lexeme, chunk_id, document_id, tf, title_tf, chunk_length)
        SELECT c.tenant_id, t.lexeme, c.id, c.document_id, cardinality(t.positions),
               coalesce(cardinality(array_positions(t.weights, 'A')), 0), length(c.tsv)
        FROM kb_chunks c CROSS JOIN LATERAL unnest(c.tsv) AS t(lexeme, positions, weights)
        """
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS kb_chunks_lexicon_updated ON kb_chunks")
    op.execute("DROP TRIGGER IF EXISTS attachment_chunks_language ON attachment_chunks")
    op.execute("DROP TRIGGER IF EXISTS kb_chunks_language ON kb_chunks")
    op.execute("DROP FUNCTION IF EXISTS kb_lexicon_updated()")
    op.execute("DROP FUNCTION IF EXISTS attachment_chunk_language()")
    op.execute("DROP FUNCTION IF EXISTS kb_chunk_language()")
    op.execute("DROP FUNCTION IF EXISTS tenant_text_config(uuid)")
    languages = op.get_bind().scalar(
        sa.text("SELECT count(*) FROM kb_chunks WHERE language <> 'english'::regconfig")
    )
    for table in TABLES:
        op.drop_index(f"ix_{table}_language", table_name=table)
        _set_tsv(table, ENGLISH)
        op.drop_column(table, "language")
    op.drop_column("kb_documents", "language")
    if languages:  # some vectors changed back: the lexicon is counted from them again
        _recount_lexicon()
