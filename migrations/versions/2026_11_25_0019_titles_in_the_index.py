"""Titles are indexed: each chunk carries its parent's title, weighted in its full text.

1. `kb_chunks.title` and `attachment_chunks.title`: the document's title, or the
   attachment's file name with `.`, `_` and `-` read as spaces (as
   `app.embeddings.base.attachment_title` does for new chunks).
2. `tsv` is rebuilt as `setweight(title, 'A') || setweight(text, 'B')`; existing chunks are
   re-indexed here (one rewrite of each chunk table), and the BM25 term statistics of
   migration 0010 are recounted from the new vectors.
3. Embeddings are not recomputed here: a migration cannot run the configured model cheaply.
   `threadline reindex` re-embeds every chunk with its title into a new column and switches
   to it once complete (docs/operations.md); until then the dense leg reads the old vectors.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TITLED = (
    "setweight(to_tsvector('english', title), 'A') || setweight(to_tsvector('english', text), 'B')"
)
UNTITLED = "to_tsvector('english', text)"
TABLES = {
    "kb_chunks": ("kb_documents", "document_id", "p.title"),
    "attachment_chunks": (
        "attachments",
        "attachment_id",
        "btrim(regexp_replace(coalesce(p.filename, ''), '[._-]+', ' ', 'g'))",
    ),
}


def _rebuild_tsv(table: str, expression: str) -> None:
    op.drop_index(f"ix_{table}_tsv", table_name=table)
    op.drop_column(table, "tsv")
    op.add_column(table, sa.Column("tsv", pg.TSVECTOR, sa.Computed(expression, persisted=True)))
    op.create_index(f"ix_{table}_tsv", table, ["tsv"], postgresql_using="gin")


def _recount_statistics() -> None:
    # As migration 0010 counted them, from the rebuilt vectors.
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


def upgrade() -> None:
    for table, (parent, key, title) in TABLES.items():
        op.add_column(table, sa.Column("title", sa.Text, nullable=False, server_default=""))
        # The old vector goes first, so the rows are written once more, not twice.
        op.drop_index(f"ix_{table}_tsv", table_name=table)
        op.drop_column(table, "tsv")
        op.execute(
            f"UPDATE {table} c SET title = {title} FROM {parent} p "
            f"WHERE p.tenant_id = c.tenant_id AND p.id = c.{key}"
        )
        op.add_column(table, sa.Column("tsv", pg.TSVECTOR, sa.Computed(TITLED, persisted=True)))
        op.create_index(f"ix_{table}_tsv", table, ["tsv"], postgresql_using="gin")
    _recount_statistics()


def downgrade() -> None:
    for table in TABLES:
        _rebuild_tsv(table, UNTITLED)
        op.drop_column(table, "title")
    _recount_statistics()
