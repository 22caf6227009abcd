"""Term statistics for BM25 scoring of the lexical leg (per tenant, maintained by triggers).

`ts_rank_cd` knows nothing of how rare a word is; BM25 needs each term's document frequency
and the average chunk length. Statement-level triggers on kb_chunks keep both up to date
from the chunks' own tsvectors, inside the transaction that adds or removes the chunks.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-21
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from rls_ops import enable_tenant_rls, grant_dml
from sqlalchemy.dialects import postgresql as pg

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UUID = pg.UUID(as_uuid=True)


def upgrade() -> None:
    op.create_table(
        "kb_term_stats",
        sa.Column("tenant_id", UUID, nullable=False),
        sa.Column("lexeme", sa.Text, nullable=False),
        sa.Column("df", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "lexeme", name="pk_kb_term_stats"),
    )
    op.create_table(
        "kb_corpus_stats",
        sa.Column("tenant_id", UUID, nullable=False),
        sa.Column("chunks", sa.BigInteger, nullable=False),
        sa.Column("total_length", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", name="pk_kb_corpus_stats"),
    )
    for table in ("kb_term_stats", "kb_corpus_stats"):
        grant_dml(table)
        enable_tenant_rls(table)
    op.execute(
        """
        CREATE FUNCTION kb_stats_added() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          -- Rows are locked in (tenant, lexeme) order, in both functions: concurrent
          -- ingestions then queue on shared words instead of deadlocking.
          INSERT INTO kb_term_stats AS s (tenant_id, lexeme, df)
          SELECT n.tenant_id, l.lexeme, count(*)
          FROM added n, unnest(tsvector_to_array(n.tsv)) AS l(lexeme)
          GROUP BY 1, 2
          ORDER BY 1, 2
          ON CONFLICT (tenant_id, lexeme) DO UPDATE SET df = s.df + EXCLUDED.df;
          INSERT INTO kb_corpus_stats AS c (tenant_id, chunks, total_length)
          SELECT tenant_id, count(*), coalesce(sum(length(tsv)), 0) FROM added GROUP BY 1
          ON CONFLICT (tenant_id) DO UPDATE
            SET chunks = c.chunks + EXCLUDED.chunks,
                total_length = c.total_length + EXCLUDED.total_length;
          RETURN NULL;
        END $$
        """
    )
    op.execute(
        """
        CREATE FUNCTION kb_stats_removed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          PERFORM 1 FROM kb_term_stats s
          WHERE (s.tenant_id, s.lexeme) IN (
            SELECT o.tenant_id, l.lexeme
            FROM removed o, unnest(tsvector_to_array(o.tsv)) AS l(lexeme))
          ORDER BY s.tenant_id, s.lexeme
          FOR UPDATE;
          UPDATE kb_term_stats s SET df = s.df - r.n
          FROM (SELECT o.tenant_id, l.lexeme, count(*) AS n
                FROM removed o, unnest(tsvector_to_array(o.tsv)) AS l(lexeme)
                GROUP BY 1, 2) r
          WHERE s.tenant_id = r.tenant_id AND s.lexeme = r.lexeme;
          DELETE FROM kb_term_stats s USING (SELECT DISTINCT tenant_id FROM removed) t
          WHERE s.tenant_id = t.tenant_id AND s.df <= 0;
          UPDATE kb_corpus_stats c
          SET chunks = c.chunks - r.n, total_length = c.total_length - r.len
          FROM (SELECT tenant_id, count(*) AS n, coalesce(sum(length(tsv)), 0) AS len
                FROM removed GROUP BY 1) r
          WHERE c.tenant_id = r.tenant_id;
          RETURN NULL;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER kb_chunks_stats_added AFTER INSERT ON kb_chunks "
        "REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION kb_stats_added()"
    )
    op.execute(
        "CREATE TRIGGER kb_chunks_stats_removed AFTER DELETE ON kb_chunks "
        "REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION kb_stats_removed()"
    )
    # Chunks that already exist count too.
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


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS kb_chunks_stats_removed ON kb_chunks")
    op.execute("DROP TRIGGER IF EXISTS kb_chunks_stats_added ON kb_chunks")
    op.execute("DROP FUNCTION IF EXISTS kb_stats_removed()")
    op.execute("DROP FUNCTION IF EXISTS kb_stats_added()")
    op.drop_table("kb_corpus_stats")
    op.drop_table("kb_term_stats")
