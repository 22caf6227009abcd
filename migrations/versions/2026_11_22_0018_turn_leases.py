"""Running turns have an owner with a lease.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-22
"""

from collections.abc import Sequence

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass  # filled in by the change that needs it


def downgrade() -> None:
    pass
