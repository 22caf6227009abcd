"""Keep each uploaded file (to re-index it later) and a record of how it was ingested.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-21
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("attachments", "kb_documents")


def upgrade() -> None:
    for table in TABLES:
        op.add_column(table, sa.Column("source", sa.LargeBinary))
        op.add_column(table, sa.Column("ingestion", pg.JSONB, nullable=False, server_default="{}"))


def downgrade() -> None:
    for table in TABLES:
        op.drop_column(table, "ingestion")
        op.drop_column(table, "source")
