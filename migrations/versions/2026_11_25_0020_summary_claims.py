"""A session's running summary is folded by one background job at a time.

`chat_sessions.summary_claimed_until`: set by the summary job that is folding the session's
turns (a compare-and-set on the row), cleared when it stores the new summary. Another job
finds the claim and leaves the session alone, so the same turns are never summarised twice;
a claim whose job died lapses at that time (ADR 0035).

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "chat_sessions",
        sa.Column("summary_claimed_until", sa.DateTime(timezone=True), nullable=True),
    )


def downgrade() -> None:
    op.drop_column("chat_sessions", "summary_claimed_until")
