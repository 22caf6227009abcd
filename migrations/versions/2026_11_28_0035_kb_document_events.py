"""A knowledge-base document's status history: `kb_document_events`, one row per status a
document entered, written by the statement that changed it (ADR 0088; issue 28, item 2).

Under the tenant's row-level security; the rows go with their document (ON DELETE CASCADE).
Each existing document starts its history with one event: the status it is in, at the time
its row last changed (the earlier steps were never recorded).

Revision ID: 0035
Revises: 0034
Create Date: 2026-11-28
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from rls_ops import enable_tenant_rls, grant_dml
from sqlalchemy.dialects import postgresql as pg

revision: str = "0035"
down_revision: str | None = "0034"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UUID = pg.UUID(as_uuid=True)

# What the row says of its current status, as the application's events word it.
_BACKFILL = """
INSERT INTO kb_document_events (tenant_id, id, document_id, status, detail, created_at)
SELECT tenant_id, gen_random_uuid(), id, status,
       CASE status
         WHEN 'failed' THEN error
         WHEN 'ready' THEN chunk_count || CASE WHEN chunk_count = 1 THEN ' chunk' ELSE ' chunks' END
         ELSE 'in this status when the history began'
       END,
       updated_at
FROM kb_documents
"""


def upgrade() -> None:
    op.create_table(
        "kb_document_events",
        sa.Column("tenant_id", UUID, nullable=False),
        sa.Column("id", UUID, nullable=False),
        sa.Column("document_id", UUID, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("detail", sa.Text, nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.text("clock_timestamp()"),
        ),
        sa.PrimaryKeyConstraint("tenant_id", "id", name="pk_kb_document_events"),
        sa.ForeignKeyConstraint(
            ["tenant_id", "document_id"],
            ["kb_documents.tenant_id", "kb_documents.id"],
            ondelete="CASCADE",
            name="fk_kb_document_events_tenant_id_document_id_kb_documents",
        ),
    )
    op.create_index(
        "ix_kb_document_events_document",
        "kb_document_events",
        ["tenant_id", "document_id", "created_at"],
    )
    grant_dml("kb_document_events")
    enable_tenant_rls("kb_document_events")
    # Row-level security is forced on both tables, even for their owner: lifted for the
    # backfill (in this transaction only), so an owner that is no superuser reads every
    # tenant's documents and writes their events.
    for table in ("kb_documents", "kb_document_events"):
        op.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
    op.execute(_BACKFILL)
    for table in ("kb_documents", "kb_document_events"):
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")


def downgrade() -> None:
    op.drop_table("kb_document_events")
