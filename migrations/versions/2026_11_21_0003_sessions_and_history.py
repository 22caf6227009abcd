"""Chat sessions and the query_history of their turns.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from rls_ops import enable_tenant_rls, grant_dml
from sqlalchemy.dialects import postgresql as pg

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UUID = pg.UUID(as_uuid=True)
NOW = sa.text("clock_timestamp()")


def upgrade() -> None:
    op.create_table(
        "chat_sessions",
        sa.Column("tenant_id", UUID, nullable=False),
        sa.Column("id", UUID, nullable=False),
        sa.Column("user_id", UUID, nullable=False),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("summary", sa.Text),
        sa.Column("summarized_turns", sa.Integer, nullable=False, server_default="0"),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=NOW),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=NOW),
        sa.PrimaryKeyConstraint("tenant_id", "id", name="pk_chat_sessions"),
        sa.ForeignKeyConstraint(
            ["tenant_id", "user_id"],
            ["users.tenant_id", "users.id"],
            ondelete="CASCADE",
            name="fk_chat_sessions_tenant_id_user_id_users",
        ),
    )
    op.create_index(
        "ix_chat_sessions_owner_created",
        "chat_sessions",
        ["tenant_id", "user_id", "created_at", "id"],
    )
    op.create_table(
        "query_history",
        sa.Column("tenant_id", UUID, nullable=False),
        sa.Column("id", UUID, nullable=False),
        sa.Column("session_id", UUID, nullable=False),
        sa.Column("user_id", UUID, nullable=False),
        sa.Column("user_query", sa.Text, nullable=False),
        sa.Column("answer", sa.Text, nullable=False, server_default=""),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("query_composition", sa.Text),
        sa.Column("context_metadata", pg.JSONB, nullable=False, server_default="{}"),
        sa.Column("attachment_ids", pg.ARRAY(UUID), nullable=False, server_default="{}"),
        sa.Column("model", sa.Text),
        sa.Column("prompt_tokens", sa.Integer, nullable=False, server_default="0"),
        sa.Column("completion_tokens", sa.Integer, nullable=False, server_default="0"),
        sa.Column("latency_ms", sa.Integer),
        sa.Column("idempotency_key", sa.Text),
        sa.Column("completed_at", sa.DateTime(timezone=True)),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=NOW),
        sa.PrimaryKeyConstraint("tenant_id", "id", name="pk_query_history"),
        sa.ForeignKeyConstraint(
            ["tenant_id", "session_id"],
            ["chat_sessions.tenant_id", "chat_sessions.id"],
            ondelete="CASCADE",
            name="fk_query_history_tenant_id_session_id_chat_sessions",
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id", "user_id"],
            ["users.tenant_id", "users.id"],
            ondelete="CASCADE",
            name="fk_query_history_tenant_id_user_id_users",
        ),
        sa.CheckConstraint(
            "status IN ('pending', 'complete', 'incomplete', 'failed')",
            name="ck_query_history_status",
        ),
        sa.CheckConstraint(
            "query_composition IS NULL OR "
            "query_composition IN ('pure_kb', 'pure_doc', 'hybrid', 'chat')",
            name="ck_query_history_query_composition",
        ),
    )
    op.create_index(
        "ix_query_history_session_created",
        "query_history",
        ["tenant_id", "session_id", "created_at"],
    )
    op.create_index(
        "ix_query_history_tenant_created", "query_history", ["tenant_id", "created_at", "id"]
    )
    op.create_index(
        "ix_query_history_user_created", "query_history", ["tenant_id", "user_id", "created_at"]
    )
    for table in ("chat_sessions", "query_history"):
        grant_dml(table)
        enable_tenant_rls(table)


def downgrade() -> None:
    op.drop_table("query_history")
    op.drop_table("chat_sessions")
