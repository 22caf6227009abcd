"""The append-only audit log of admin reads.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-21
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from rls_ops import enable_tenant_rls, grant_dml
from sqlalchemy.dialects import postgresql as pg

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UUID = pg.UUID(as_uuid=True)


def upgrade() -> None:
    op.create_table(
        "audit_log",
        sa.Column("tenant_id", UUID, nullable=False),
        sa.Column("id", sa.BigInteger, sa.Identity(always=True), nullable=False),
        sa.Column("actor_user_id", UUID, nullable=False),
        sa.Column("action", sa.Text, nullable=False),
        sa.Column("target_user_id", UUID),
        sa.Column("resource", sa.Text),
        sa.Column("details", pg.JSONB, nullable=False, server_default="{}"),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.text("clock_timestamp()"),
        ),
        sa.PrimaryKeyConstraint("tenant_id", "id", name="pk_audit_log"),
    )
    op.create_index("ix_audit_log_tenant_created", "audit_log", ["tenant_id", "created_at"])
    op.create_index(
        "ix_audit_log_target", "audit_log", ["tenant_id", "target_user_id", "created_at"]
    )
    # Append-only for the application: no UPDATE, no DELETE.
    grant_dml("audit_log", "SELECT, INSERT")
    enable_tenant_rls("audit_log")


def downgrade() -> None:
    op.drop_table("audit_log")
