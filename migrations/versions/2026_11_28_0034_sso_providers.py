"""Single sign-on with OpenID Connect: a tenant's provider, and sign-ins under way (ADR 0081).

`sso_providers`: at most one per tenant (issuer, client, encrypted secret, allowed e-mail
domains, groups claim, whether password login stays allowed). `sso_login_attempts`: the
state (hashed), nonce and PKCE verifier of a sign-in sent to the provider, deleted by its
callback. Both under the tenant's row-level security.

Revision ID: 0034
Revises: 0031
Create Date: 2026-11-28
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from rls_ops import enable_tenant_rls, grant_dml
from sqlalchemy.dialects import postgresql as pg

revision: str = "0034"
down_revision: str | None = "0031"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UUID = pg.UUID(as_uuid=True)
NOW = sa.text("clock_timestamp()")


def upgrade() -> None:
    op.create_table(
        "sso_providers",
        sa.Column("tenant_id", UUID, nullable=False),
        sa.Column("display_name", sa.Text, nullable=False),
        sa.Column("issuer", sa.Text, nullable=False),
        sa.Column("client_id", sa.Text, nullable=False),
        sa.Column("client_secret_encrypted", sa.Text, nullable=False),
        sa.Column("allowed_domains", pg.ARRAY(sa.Text), nullable=False),
        sa.Column("scopes", sa.Text, nullable=False, server_default="openid email profile"),
        sa.Column("groups_claim", sa.Text),
        sa.Column("enabled", sa.Boolean, nullable=False, server_default=sa.true()),
        sa.Column("password_login", sa.Boolean, nullable=False, server_default=sa.true()),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=NOW),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=NOW),
        sa.PrimaryKeyConstraint("tenant_id", name="pk_sso_providers"),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            ondelete="CASCADE",
            name="fk_sso_providers_tenant_id_tenants",
        ),
    )
    op.create_table(
        "sso_login_attempts",
        sa.Column("tenant_id", UUID, nullable=False),
        sa.Column("state_hash", sa.Text, nullable=False),
        sa.Column("browser_hash", sa.Text, nullable=False),
        sa.Column("nonce", sa.Text, nullable=False),
        sa.Column("code_verifier", sa.Text, nullable=False),
        sa.Column("issuer", sa.Text, nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=NOW),
        sa.PrimaryKeyConstraint("tenant_id", "state_hash", name="pk_sso_login_attempts"),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            ondelete="CASCADE",
            name="fk_sso_login_attempts_tenant_id_tenants",
        ),
    )
    for table in ("sso_providers", "sso_login_attempts"):
        grant_dml(table)
        enable_tenant_rls(table)


def downgrade() -> None:
    op.drop_table("sso_login_attempts")
    op.drop_table("sso_providers")
