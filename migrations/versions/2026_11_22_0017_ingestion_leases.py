"""Ingestion jobs kept in the database: a claim with a lease.

Documents and attachments carry who is ingesting them (`claimed_by`), until when that claim
holds unless renewed (`lease_expires_at`), and how many runs have claimed them since they
were last queued (`attempts`). A partial index keeps the in-flight rows (`pending`,
`processing`) apart, so the recovery scan reads only those, however large the tables grow.

The scan runs across tenants: a read-only door, open only while the transaction-local
`threadline.maintenance` is `on` (as for `tenants`, 0011), shows in-flight rows and no
others; everything the recovery then changes is done inside each tenant's own scope.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-22
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("kb_documents", "attachments")
IN_FLIGHT = "status IN ('pending', 'processing')"


def upgrade() -> None:
    for table in TABLES:
        op.add_column(table, sa.Column("claimed_by", sa.Text))
        op.add_column(table, sa.Column("lease_expires_at", sa.DateTime(timezone=True)))
        op.add_column(table, sa.Column("attempts", sa.Integer, nullable=False, server_default="0"))
        op.create_index(
            f"ix_{table}_in_flight",
            table,
            ["lease_expires_at"],
            postgresql_where=sa.text(IN_FLIGHT),
        )
        op.execute(
            f"CREATE POLICY in_flight_maintenance ON {table} FOR SELECT "
            f"USING (current_setting('threadline.maintenance', true) = 'on' AND {IN_FLIGHT})"
        )


def downgrade() -> None:
    for table in TABLES:
        op.execute(f"DROP POLICY IF EXISTS in_flight_maintenance ON {table}")
        op.drop_index(f"ix_{table}_in_flight", table_name=table)
        op.drop_column(table, "attempts")
        op.drop_column(table, "lease_expires_at")
        op.drop_column(table, "claimed_by")
