"""Tenant-curated FAQ entries for the triage fast path.

Revision ID: 0013
Revises: 0011
Create Date: 2026-11-22
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import Vector
from rls_ops import embedding_dim, enable_tenant_rls, grant_dml
from sqlalchemy.dialects import postgresql as pg

revision: str = "0013"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UUID = pg.UUID(as_uuid=True)


def upgrade() -> None:
    op.create_table(
        "faqs",
        sa.Column("tenant_id", UUID, nullable=False),
        sa.Column("id", UUID, nullable=False),
        sa.Column("question", sa.Text, nullable=False),
        sa.Column("answer", sa.Text, nullable=False),
        sa.Column("embedding", Vector(embedding_dim()), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("clock_timestamp()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], ondelete="CASCADE", name="fk_faqs_tenant_id_tenants"
        ),
        sa.PrimaryKeyConstraint("tenant_id", "id", name="pk_faqs"),
    )
    op.create_index("ix_faqs_tenant_created", "faqs", ["tenant_id", "created_at"])
    grant_dml("faqs")
    enable_tenant_rls("faqs")


def downgrade() -> None:
    op.drop_table("faqs")
