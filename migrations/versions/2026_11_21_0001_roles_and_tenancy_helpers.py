"""Application role, pgvector, and the tenant-scope function read by every RLS policy.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from collections.abc import Sequence

from alembic import context, op
from rls_ops import app_role

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    role = app_role()
    password = str(context.config.attributes.get("app_password", ""))
    # The application logs in as this role: it neither owns the tables nor bypasses RLS.
    # Roles are cluster-wide, so an existing one is re-asserted rather than created.
    op.execute(
        f"""
        DO $$
        BEGIN
          IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{role}') THEN
            EXECUTE format('CREATE ROLE %I LOGIN', '{role}');
          END IF;
          EXECUTE format(
            'ALTER ROLE %I LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE', '{role}'
          );
          EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), '{role}');
        END
        $$
        """
    )
    # A standard SQL literal (quotes doubled), sent as is: no bind-parameter parsing of ':'.
    literal = "'" + password.replace("'", "''") + "'"
    op.get_bind().exec_driver_sql(f'ALTER ROLE "{role}" PASSWORD {literal}')
    op.execute(f'GRANT USAGE ON SCHEMA public TO "{role}"')
    op.execute(f'GRANT SELECT ON TABLE alembic_version TO "{role}"')
    op.execute(
        """
        CREATE FUNCTION threadline_current_tenant() RETURNS uuid
        LANGUAGE sql STABLE PARALLEL SAFE
        AS $$ SELECT NULLIF(current_setting('threadline.tenant_id', true), '')::uuid $$
        """
    )


def downgrade() -> None:
    role = app_role()
    op.execute("DROP FUNCTION IF EXISTS threadline_current_tenant()")
    op.execute(f'REVOKE SELECT ON TABLE alembic_version FROM "{role}"')
    op.execute(f'REVOKE USAGE ON SCHEMA public FROM "{role}"')
    # The role itself is left in place: roles are cluster-wide and other databases on the
    # same server may still use it.
