"""Refresh-token families and uses: single-use refresh tokens, replay revokes the chain.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-21
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from rls_ops import enable_tenant_rls, grant_dml
from sqlalchemy.dialects import postgresql as pg

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UUID = pg.UUID(as_uuid=True)
NOW = sa.text("clock_timestamp()")


def upgrade() -> None:
    op.create_table(
        "refresh_token_families",
        sa.Column("tenant_id", UUID, nullable=False),
        sa.Column("id", UUID, nullable=False),
        sa.Column("user_id", UUID, nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True)),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=NOW),
        sa.PrimaryKeyConstraint("tenant_id", "id", name="pk_refresh_token_families"),
        sa.ForeignKeyConstraint(
            ["tenant_id", "user_id"],
            ["users.tenant_id", "users.id"],
            ondelete="CASCADE",
            name="fk_refresh_token_families_tenant_id_user_id_users",
        ),
    )
    op.create_table(
        "refresh_token_uses",
        sa.Column("tenant_id", UUID, nullable=False),
        sa.Column("jti", sa.Text, nullable=False),
        sa.Column("family_id", UUID, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=NOW),
        sa.PrimaryKeyConstraint("tenant_id", "jti", name="pk_refresh_token_uses"),
        sa.ForeignKeyConstraint(
            ["tenant_id", "family_id"],
            ["refresh_token_families.tenant_id", "refresh_token_families.id"],
            ondelete="CASCADE",
            name="fk_refresh_token_uses_family",
        ),
    )
    for table in ("refresh_token_families", "refresh_token_uses"):
        grant_dml(table)
        enable_tenant_rls(table)


def downgrade() -> None:
    op.drop_table("refresh_token_uses")
    op.drop_table("refresh_token_families")
