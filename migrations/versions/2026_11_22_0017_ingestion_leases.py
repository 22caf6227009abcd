"""Ingestion jobs kept in the database: a claim with a lease.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-22
"""

from collections.abc import Sequence

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass  # filled in by the change that needs it


def downgrade() -> None:
    pass
