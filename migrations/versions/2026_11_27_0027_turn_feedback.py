"""Feedback is data: a user's thumbs up or down on one of their turns, with an optional
comment, one row per turn (issue 28, item 3).

It goes with its turn and with its user (ON DELETE CASCADE on both composite keys), so a
deleted conversation, the retention sweep and an erasure leave none behind.

Revision ID: 0027
Revises: 0024
Create Date: 2026-11-27
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from rls_ops import enable_tenant_rls, grant_dml
from sqlalchemy.dialects import postgresql as pg

revision: str = "0027"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UUID = pg.UUID(as_uuid=True)


def upgrade() -> None:
    op.create_table(
        "turn_feedback",
        sa.Column("tenant_id", UUID, nullable=False),
        sa.Column("turn_id", UUID, nullable=False),
        sa.Column("user_id", UUID, nullable=False),
        sa.Column("value", sa.Text, nullable=False),
        sa.Column("comment", sa.Text, nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("clock_timestamp()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("clock_timestamp()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id", "turn_id"],
            ["query_history.tenant_id", "query_history.id"],
            ondelete="CASCADE",
            name="fk_turn_feedback_tenant_id_turn_id_query_history",
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id", "user_id"],
            ["users.tenant_id", "users.id"],
            ondelete="CASCADE",
            name="fk_turn_feedback_tenant_id_user_id_users",
        ),
        sa.CheckConstraint("value IN ('up', 'down')", name="ck_turn_feedback_value"),
        sa.CheckConstraint("char_length(comment) <= 2000", name="ck_turn_feedback_comment_length"),
        sa.PrimaryKeyConstraint("tenant_id", "turn_id", name="pk_turn_feedback"),
    )
    op.create_index("ix_turn_feedback_user", "turn_feedback", ["tenant_id", "user_id"])
    grant_dml("turn_feedback")
    enable_tenant_rls("turn_feedback")


def downgrade() -> None:
    op.drop_table("turn_feedback")
