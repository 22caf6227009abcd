"""Indexes on `tenant_id` of checkpoint_blobs and checkpoint_writes, like checkpoints has
(0011): their RLS policy filters on it, and erasure and retention delete by it.

Revision ID: 0015
Revises: 0013
Create Date: 2026-11-22
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0015"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("checkpoint_blobs", "checkpoint_writes")


def upgrade() -> None:
    for table in TABLES:
        op.execute(f"CREATE INDEX {table}_tenant_idx ON {table} (tenant_id)")


def downgrade() -> None:
    for table in TABLES:
        op.execute(f"DROP INDEX IF EXISTS {table}_tenant_idx")
