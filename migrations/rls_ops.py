"""Helpers the revisions share: the application role, grants and row-level security.

Kept deliberately small and stable: revisions that already ran depend on these exact
statements.
"""

from __future__ import annotations

from alembic import context, op


def app_role() -> str:
    role = context.config.attributes.get("app_role", "threadline_app")
    # Interpolated into DDL: only plain identifiers are accepted.
    if not (isinstance(role, str) and role.replace("_", "").isalnum()):
        raise ValueError(f"invalid application role name: {role!r}")
    return role


def embedding_dim() -> int:
    return int(context.config.attributes.get("embedding_dim", 384))


def grant_dml(table: str, privileges: str = "SELECT, INSERT, UPDATE, DELETE") -> None:
    op.execute(f'GRANT {privileges} ON TABLE "{table}" TO "{app_role()}"')


def enable_tenant_rls(table: str, column: str = "tenant_id") -> None:
    """Enable and force RLS on `table`; rows are visible and writable only in their tenant."""
    op.execute(f'ALTER TABLE "{table}" ENABLE ROW LEVEL SECURITY')
    op.execute(f'ALTER TABLE "{table}" FORCE ROW LEVEL SECURITY')
    op.execute(
        f'CREATE POLICY tenant_isolation ON "{table}" '
        f"USING ({column} = threadline_current_tenant()) "
        f"WITH CHECK ({column} = threadline_current_tenant())"
    )


def lookup_policy(table: str, name: str, column: str, setting: str) -> None:
    """A read-only door: rows whose `column` equals the transaction-local `setting`."""
    op.execute(
        f'CREATE POLICY {name} ON "{table}" FOR SELECT '
        f"USING ({column} = NULLIF(current_setting('{setting}', true), ''))"
    )
