"""A turn's row records the version of its manifest (`context_metadata`), ADR 0066.

`query_history.manifest_version`: 2 for a manifest written through the typed model
(`app/conversation/turn/manifest.py`); NULL for a row written before, read as version 1.
Existing rows are not rewritten: NULL is what says they are version 1.

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-27
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("query_history", sa.Column("manifest_version", sa.SmallInteger(), nullable=True))


def downgrade() -> None:
    op.drop_column("query_history", "manifest_version")
