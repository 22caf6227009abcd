"""Pinned conversations: `chat_sessions.pinned_at` (NULL: not pinned), so a user's pinned
conversations are listed first, under "Pinned" (issue 28, item 5).

Revision ID: 0028
Revises: 0027
Create Date: 2026-11-27
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0028"
down_revision: str | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "chat_sessions", sa.Column("pinned_at", sa.DateTime(timezone=True), nullable=True)
    )


def downgrade() -> None:
    op.drop_column("chat_sessions", "pinned_at")
