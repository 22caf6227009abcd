"""An inverted index for BM25: one row per (tenant, lexeme, chunk), kept by triggers.

BM25 used to read, for every chunk matching any of the question's words, that chunk's whole
tsvector (`unnest`) to find the frequencies of the question's words: work proportional to
the matching chunks times their length. On SciFact (11,325 chunks) a 14-word claim matched
4,763 chunks and unnested 295,000 lexemes, 125 ms a search. `kb_term_postings` holds each
chunk's frequency of each of its lexemes (and of the title's, weight 'A'), so a search reads
only the postings of the question's own lexemes through the primary key (an index-only scan:
the scored columns are INCLUDEd): 6,086 rows and ~11 ms for the same claim (ADR 0040).

Statement-level triggers on kb_chunks add and remove the postings with the chunks, in the
same transaction (beside the term statistics of migration 0010). Chunks are never updated in
place (a re-ingested document's chunks are deleted and inserted again). Existing chunks are
indexed here. A partial index finds a tenant's documents that are not `ready` (being
re-ingested): their chunks stay out of results, as before. The GIN index on `kb_chunks.tsv`
goes: nothing searches it any more (attachments keep theirs).

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from rls_ops import enable_tenant_rls, grant_dml
from sqlalchemy.dialects import postgresql as pg

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UUID = pg.UUID(as_uuid=True)

# A chunk's postings, from its tsvector: the lexeme's positions (its frequency), those of
# weight 'A' (the title's), and the chunk's length in lexemes (BM25's document length).
POSTINGS_OF = """
    SELECT c.tenant_id, t.lexeme, c.id, c.document_id,
           cardinality(t.positions),
           coalesce(cardinality(array_positions(t.weights, 'A')), 0),
           length(c.tsv)
    FROM {chunks} c CROSS JOIN LATERAL unnest(c.tsv) AS t(lexeme, positions, weights)
"""

COLUMNS = "(tenant_id, lexeme, chunk_id, document_id, tf, title_tf, chunk_length)"


def upgrade() -> None:
    op.create_table(
        "kb_term_postings",
        sa.Column("tenant_id", UUID, nullable=False),
        sa.Column("lexeme", sa.Text, nullable=False),
        sa.Column("chunk_id", UUID, nullable=False),
        sa.Column("document_id", UUID, nullable=False),
        sa.Column("tf", sa.SmallInteger, nullable=False),
        sa.Column("title_tf", sa.SmallInteger, nullable=False),
        sa.Column("chunk_length", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint(
            "tenant_id",
            "lexeme",
            "chunk_id",
            name="pk_kb_term_postings",
            postgresql_include=["document_id", "tf", "title_tf", "chunk_length"],
        ),
    )
    grant_dml("kb_term_postings")
    enable_tenant_rls("kb_term_postings")
    op.create_index(
        "ix_kb_documents_not_ready",
        "kb_documents",
        ["tenant_id"],
        postgresql_where=sa.text("status <> 'ready'"),
    )
    op.execute(
        f"""
        CREATE FUNCTION kb_postings_added() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          INSERT INTO kb_term_postings {COLUMNS}
          {POSTINGS_OF.format(chunks="added")};
          RETURN NULL;
        END $$
        """
    )
    op.execute(
        """
        CREATE FUNCTION kb_postings_removed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          DELETE FROM kb_term_postings p
          USING removed o CROSS JOIN LATERAL unnest(tsvector_to_array(o.tsv)) AS l(lexeme)
          WHERE p.tenant_id = o.tenant_id AND p.lexeme = l.lexeme AND p.chunk_id = o.id;
          RETURN NULL;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER kb_chunks_postings_added AFTER INSERT ON kb_chunks "
        "REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION kb_postings_added()"
    )
    op.execute(
        "CREATE TRIGGER kb_chunks_postings_removed AFTER DELETE ON kb_chunks "
        "REFERENCING OLD TABLE AS removed "
        "FOR EACH STATEMENT EXECUTE FUNCTION kb_postings_removed()"
    )
    op.execute(f"INSERT INTO kb_term_postings {COLUMNS} {POSTINGS_OF.format(chunks='kb_chunks')}")
    # Nothing searches kb_chunks.tsv through its GIN index any more: it would only cost writes.
    op.drop_index("ix_kb_chunks_tsv", table_name="kb_chunks")


def downgrade() -> None:
    op.create_index("ix_kb_chunks_tsv", "kb_chunks", ["tsv"], postgresql_using="gin")
    op.execute("DROP TRIGGER IF EXISTS kb_chunks_postings_removed ON kb_chunks")
    op.execute("DROP TRIGGER IF EXISTS kb_chunks_postings_added ON kb_chunks")
    op.execute("DROP FUNCTION IF EXISTS kb_postings_removed()")
    op.execute("DROP FUNCTION IF EXISTS kb_postings_added()")
    op.drop_index("ix_kb_documents_not_ready", table_name="kb_documents")
    op.drop_table("kb_term_postings")
